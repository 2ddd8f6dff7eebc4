/**
 * Which worklist lines are in the DOM (issue 15: 100,000 series at 60 frames per second). Only
 * the lines in and near the scrolled-to window are drawn; spacers above and below stand for the
 * rest. Every line of a kind has one height (the CSS pins it), so where each line starts is a
 * running sum and the window is found by binary search, with no measuring. DOM-free, so unit
 * tests can check it.
 */
import type { Scan } from './api/types.ts';
import type { StudyRow } from './worklist-rows.ts';

export type Line = { kind: 'study'; row: StudyRow } | { kind: 'series'; row: StudyRow; scan: Scan; index: number };

/** worklist.css pins rows at these heights: a study row's text, a series row's 48 px thumbnail. */
export const STUDY_ROW_PX = 34;
export const SERIES_ROW_PX = 58;
/** Lines drawn beyond each edge of the window, and the step the window moves by: a scroll of a
 * few pixels redraws nothing, one of a line or two draws the next few in one go. */
export const OVERSCAN = 12;

/** Where each line starts, and (last) the height of them all. */
export function lineOffsets(lines: readonly Pick<Line, 'kind'>[]): Float64Array {
  const offsets = new Float64Array(lines.length + 1);
  for (let i = 0; i < lines.length; i += 1) offsets[i + 1] = offsets[i]! + (lines[i]!.kind === 'study' ? STUDY_ROW_PX : SERIES_ROW_PX);
  return offsets;
}

/** The first line that ends below `y`. */
function lineAt(offsets: Float64Array, y: number): number {
  let low = 0;
  let high = offsets.length - 1;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (offsets[middle + 1]! <= y) low = middle + 1;
    else high = middle;
  }
  return low;
}

/** Lines [start, end) to draw for a viewport `height` pixels tall scrolled to `top`. */
export function visibleLines(offsets: Float64Array, top: number, height: number): { start: number; end: number } {
  const count = offsets.length - 1;
  if (count <= 0) return { start: 0, end: 0 };
  const first = lineAt(offsets, Math.max(0, top));
  const last = lineAt(offsets, Math.max(0, top + height));
  const start = Math.max(0, Math.floor((first - OVERSCAN) / OVERSCAN) * OVERSCAN);
  const end = Math.min(count, Math.ceil((last + 1 + OVERSCAN) / OVERSCAN) * OVERSCAN);
  return { start, end };
}
