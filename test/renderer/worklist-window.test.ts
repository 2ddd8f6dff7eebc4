/**
 * Which worklist lines are drawn for a scroll position (renderer/src/worklist-window.ts): every
 * line in view is drawn, with some to spare on each side, never past either end, and the
 * offsets the spacers use add up to the lines' heights.
 */
import { describe, expect, it } from 'vitest';
import { lineOffsets, OVERSCAN, SERIES_ROW_PX, STUDY_ROW_PX, visibleLines } from '../../renderer/src/worklist-window.ts';

/** A study with three series, 10,000 times: 40,000 lines. */
const lines = Array.from({ length: 40_000 }, (_, i) => ({ kind: i % 4 === 0 ? ('study' as const) : ('series' as const) }));
const offsets = lineOffsets(lines);

describe('worklist window', () => {
  it('offsets are running sums of the row heights', () => {
    expect(offsets[0]).toBe(0);
    expect(offsets[1]).toBe(STUDY_ROW_PX);
    expect(offsets[4]).toBe(STUDY_ROW_PX + 3 * SERIES_ROW_PX);
    expect(offsets[lines.length]).toBe(10_000 * (STUDY_ROW_PX + 3 * SERIES_ROW_PX));
  });

  it('draws every line that meets the viewport, with spare lines around it, at any scroll position', () => {
    const height = 900;
    for (const top of [0, 1, 33, 34, 35, 5_000, 123_456, offsets[lines.length]! - height]) {
      const { start, end } = visibleLines(offsets, top, height);
      const firstInView = lines.findIndex((_, i) => offsets[i + 1]! > top);
      const lastInView = lines.findLastIndex((_, i) => offsets[i]! < top + height);
      expect(start).toBeLessThanOrEqual(Math.max(0, firstInView - 1));
      expect(end).toBeGreaterThanOrEqual(Math.min(lines.length, lastInView + 2));
      expect(end - start).toBeLessThan(Math.ceil(height / STUDY_ROW_PX) + 4 * OVERSCAN);
      expect(start).toBeGreaterThanOrEqual(0);
      expect(end).toBeLessThanOrEqual(lines.length);
    }
  });

  it('a small scroll keeps the same window (no redraw); the end of the list is reached', () => {
    expect(visibleLines(offsets, 1_000, 900)).toEqual(visibleLines(offsets, 1_003, 900));
    expect(visibleLines(offsets, offsets[lines.length]! - 900, 900).end).toBe(lines.length);
    expect(visibleLines(lineOffsets([]), 0, 900)).toEqual({ start: 0, end: 0 });
  });
});
