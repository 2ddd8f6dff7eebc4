/**
 * Measurements on a frame (issue 11, reading tools): lengths and areas in mm from the frame's
 * pixel spacing, ROI statistics and probe values in modality units (after Rescale
 * Slope/Intercept: HU on CT). One definition for the viewer, which shows them while drawing, and
 * the server, which computes the values it keeps from the stored frame. Pure; imports only common/.
 *
 * Points are image pixel coordinates (column, row) with pixel centres at .5: the pixel in
 * column 0 spans 0..1. Pixel Spacing is "row spacing \ column spacing" (PS3.3 10.7.1.3): the
 * first value is the distance between rows (vertical), the second between columns.
 */
import { mmUnit, type PixelSpacingSource } from './pixel-spacing.ts';

/** A decoded frame in modality values (one sample per pixel; colour frames have no values here). */
export type MeasureFrame = { rows: number; columns: number; samplesPerPixel: number; values: ArrayLike<number> };

export type Point = readonly [number, number];
export type MeasureKind = 'length' | 'ellipse' | 'rectangle' | 'probe';

export type MeasureValues = {
  length_mm: number | null;
  area_mm2: number | null;
  mean: number | null;
  sd: number | null;
  value: number | null;
};

const EMPTY: MeasureValues = { length_mm: null, area_mm2: null, mean: null, sd: null, value: null };

/** Row and column spacing in mm, or null when the image gives none (then no mm are shown). */
function spacingOf(spacing: readonly number[] | null | undefined): { row: number; column: number } | null {
  const row = spacing?.[0];
  const column = spacing?.[1];
  if (row === undefined || column === undefined || !(row > 0) || !(column > 0)) return null;
  return { row, column };
}

export function lengthMm(a: Point, b: Point, spacing: readonly number[] | null | undefined): number | null {
  const s = spacingOf(spacing);
  if (!s) return null;
  return Math.hypot((b[0] - a[0]) * s.column, (b[1] - a[1]) * s.row);
}

/** The value of the pixel under a point, or null outside the image or on a colour image. */
export function probeValue(frame: MeasureFrame, p: Point): number | null {
  if (frame.samplesPerPixel !== 1) return null;
  const column = Math.floor(p[0]);
  const row = Math.floor(p[1]);
  if (column < 0 || row < 0 || column >= frame.columns || row >= frame.rows) return null;
  return frame.values[row * frame.columns + column] ?? null;
}

/**
 * Area of the drawn shape (geometric: the rectangle or ellipse through the two corners, not the
 * count of pixels, so a small ROI is not rounded to whole pixels) and the mean and SD (sample,
 * n - 1) of the pixels whose centres lie inside it.
 */
export function roiStats(frame: MeasureFrame, kind: 'ellipse' | 'rectangle', a: Point, b: Point, spacing: readonly number[] | null | undefined) {
  const left = Math.min(a[0], b[0]);
  const right = Math.max(a[0], b[0]);
  const top = Math.min(a[1], b[1]);
  const bottom = Math.max(a[1], b[1]);
  const s = spacingOf(spacing);
  const pixelArea = (right - left) * (bottom - top) * (kind === 'ellipse' ? Math.PI / 4 : 1);
  const area = s ? pixelArea * s.row * s.column : null;
  if (frame.samplesPerPixel !== 1) return { area_mm2: area, mean: null, sd: null, count: 0 };
  const cx = (left + right) / 2;
  const cy = (top + bottom) / 2;
  const rx = (right - left) / 2;
  const ry = (bottom - top) / 2;
  let count = 0;
  let sum = 0;
  let sumSquares = 0;
  const firstRow = Math.max(0, Math.floor(top));
  const lastRow = Math.min(frame.rows - 1, Math.ceil(bottom));
  const firstColumn = Math.max(0, Math.floor(left));
  const lastColumn = Math.min(frame.columns - 1, Math.ceil(right));
  for (let row = firstRow; row <= lastRow; row += 1) {
    const y = row + 0.5;
    if (y < top || y > bottom) continue;
    for (let column = firstColumn; column <= lastColumn; column += 1) {
      const x = column + 0.5;
      if (x < left || x > right) continue;
      if (kind === 'ellipse' && (rx === 0 || ry === 0 || ((x - cx) / rx) ** 2 + ((y - cy) / ry) ** 2 > 1)) continue;
      const v = frame.values[row * frame.columns + column] ?? 0;
      count += 1;
      sum += v;
      sumSquares += v * v;
    }
  }
  if (count === 0) return { area_mm2: area, mean: null, sd: null, count };
  const mean = sum / count;
  const sd = count > 1 ? Math.sqrt(Math.max(0, (sumSquares - count * mean * mean) / (count - 1))) : 0;
  return { area_mm2: area, mean, sd, count };
}

export function measure(frame: MeasureFrame, kind: MeasureKind, points: readonly Point[], spacing: readonly number[] | null | undefined): MeasureValues {
  const [a, b] = points;
  if (!a) return EMPTY;
  if (kind === 'probe') return { ...EMPTY, value: probeValue(frame, a) };
  if (!b) return EMPTY;
  if (kind === 'length') return { ...EMPTY, length_mm: lengthMm(a, b, spacing) };
  const stats = roiStats(frame, kind, a, b, spacing);
  return { ...EMPTY, area_mm2: stats.area_mm2, mean: stats.mean, sd: stats.sd };
}

/** The unit of modality values: Hounsfield units on CT (PS3.3 C.8.2.1.1.1), else none. */
export const valueUnit = (modality: string): string | null => (modality.toUpperCase() === 'CT' ? 'HU' : null);

const num = (n: number, digits: number): string => n.toFixed(digits);

/** One line for the viewer and the report: "12.3 mm", "area 78.5 mm² · mean 40.1 ± 3.2 HU", "value -998 HU". */
export function describeMeasurement(
  m: MeasureValues & { kind: MeasureKind; unit: string | null; pixel_spacing_source?: PixelSpacingSource | null | undefined },
): string {
  const unit = m.unit ? ` ${m.unit}` : '';
  // "mm (detector)" when the spacing is Imager Pixel Spacing: the size includes the magnification.
  if (m.kind === 'length') return m.length_mm === null ? 'length (no pixel spacing)' : `${num(m.length_mm, 1)} ${mmUnit(m.pixel_spacing_source)}`;
  if (m.kind === 'probe') return m.value === null ? 'value —' : `value ${num(m.value, 1)}${unit}`;
  const area = m.area_mm2 === null ? 'area — (no pixel spacing)' : `area ${num(m.area_mm2, 1)} ${mmUnit(m.pixel_spacing_source, true)}`;
  const stats = m.mean === null ? 'mean —' : `mean ${num(m.mean, 1)} ± ${num(m.sd ?? 0, 1)}${unit} (SD)`;
  return `${area} · ${stats}`;
}
