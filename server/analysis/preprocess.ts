/**
 * Slice -> model input, as the manifest's `input` section describes. This must reproduce
 * models/mia-phantom-detector/preprocess.py (the training-time reference) operation for
 * operation: a model sees exactly the numbers it was trained on or its thresholds mean nothing.
 * test/analysis/preprocess.test.ts runs both on the same slice and compares.
 */
import type { InputSpec, Normalisation } from '#server/analysis/manifest.ts';
import { percentileRanks, sortedAtRanks } from '#server/analysis/order-statistics.ts';

/**
 * One frame, row-major. `values` are modality values (HU for CT, stored values for MR) or,
 * given `rescale`, stored values whose modality values are fround(v * slope + intercept)
 * (PS3.3 C.11.1): rescaling while normalising saves a pass over the frame.
 */
export type ModalityImage = {
  values: Float32Array;
  rows: number;
  columns: number;
  modality: string;
  rescale?: { slope: number; intercept: number };
};

export type InputBatch = {
  data: Float32Array;
  dims: [number, number, number, number];
};

/**
 * numpy.percentile's default ('linear') for one q in 0..100 on sorted values, including its
 * lerp form (a + d*t below t = 0.5, b - d*(1-t) from it) so results agree to the last bit.
 * `sorted` needs only the two ranks q reads (order-statistics.ts).
 */
export function percentileSorted(sorted: ArrayLike<number>, q: number): number {
  const n = sorted.length;
  if (n === 0) throw new RangeError('percentile of an empty array');
  const index = (q / 100) * (n - 1);
  const lo = Math.floor(index);
  const hi = Math.min(lo + 1, n - 1);
  const t = index - lo;
  const a = sorted[lo] as number;
  const b = sorted[hi] as number;
  const d = b - a;
  return t >= 0.5 ? b - d * (1 - t) : a + d * t;
}

/** v -> (fround(v * slope + intercept) - lo) / span, clipped; `span` 0 marks a flat slice. */
type Stretch = { slope: number; intercept: number; lo: number; span: number; clipLo: number; clipHi: number };

const IDENTITY = { slope: 1, intercept: 0 } as const;

function stretchOf(values: Float32Array, rescale: { slope: number; intercept: number }, norm: Normalisation): Stretch {
  const { slope, intercept } = rescale;
  const [clipLo, clipHi] = norm.clip;
  if (norm.kind === 'window') return { slope, intercept, lo: norm.center - norm.width / 2, span: norm.width, clipLo, clipHi };
  // Percentiles of the modality values from order statistics of the stored ones: the rescale
  // is monotone, so it maps rank r to rank r (slope > 0) or to rank n-1-r (slope < 0).
  const n = values.length;
  const ranks = percentileRanks(n, [norm.low, norm.high]);
  const mirrored = slope < 0;
  const stored = sortedAtRanks(values, mirrored ? ranks.map((r) => n - 1 - r) : ranks);
  const sorted: Record<number, number> & { length: number } = { length: n };
  for (const r of ranks) sorted[r] = Math.fround((stored[mirrored ? n - 1 - r : r] as number) * slope + intercept);
  const lo = percentileSorted(sorted, norm.low);
  const span = percentileSorted(sorted, norm.high) - lo;
  // A flat slice (blank frame) has no contrast to stretch; the reference maps it to zeros.
  return { slope, intercept, lo, span: span < 1e-6 ? 0 : span, clipLo, clipHi };
}

/** One row of normalised values, rounded to float32 as the reference stores them. */
function stretchRow(values: Float32Array, start: number, out: Float32Array, s: Stretch): void {
  const { slope, intercept, lo, span, clipLo, clipHi } = s;
  if (span === 0) {
    out.fill(Math.min(Math.max(0, clipLo), clipHi));
    return;
  }
  if (slope === 1 && intercept === 0) {
    for (let i = 0; i < out.length; i++) {
      const v = ((values[start + i] as number) - lo) / span;
      out[i] = v < clipLo ? clipLo : v > clipHi ? clipHi : v;
    }
    return;
  }
  for (let i = 0; i < out.length; i++) {
    const v = (Math.fround((values[start + i] as number) * slope + intercept) - lo) / span;
    out[i] = v < clipLo ? clipLo : v > clipHi ? clipHi : v;
  }
}

export function normalise(values: Float32Array, norm: Normalisation): Float32Array {
  const out = new Float32Array(values.length);
  stretchRow(values, 0, out, stretchOf(values, IDENTITY, norm));
  return out;
}

type AxisMap = { i0: Int32Array; i1: Int32Array; w: Float64Array };

const axisMaps = new Map<string, AxisMap>();

/** Source indices and weights per output index; a series repeats one geometry, so cached. */
function axisMap(nIn: number, nOut: number): AxisMap {
  const key = `${nIn}:${nOut}`;
  const cached = axisMaps.get(key);
  if (cached) return cached;
  const i0 = new Int32Array(nOut);
  const i1 = new Int32Array(nOut);
  const w = new Float64Array(nOut);
  const scale = nIn / nOut;
  for (let i = 0; i < nOut; i++) {
    let src = (i + 0.5) * scale - 0.5;
    if (src < 0) src = 0;
    if (src > nIn - 1) src = nIn - 1;
    const f = Math.floor(src);
    i0[i] = f;
    i1[i] = Math.min(f + 1, nIn - 1);
    w[i] = src - f;
  }
  const map = { i0, i1, w };
  if (axisMaps.size > 64) axisMaps.clear();
  axisMaps.set(key, map);
  return map;
}

/**
 * Bilinear, half-pixel centres, edges clamped, no antialiasing (the reference's definition),
 * over rows that `rowAt` supplies: the resize reads at most two source rows per output row, so
 * a caller can produce (normalise) just those rows instead of a whole intermediate image.
 */
function resizeRows(rowAt: (y: number) => Float32Array, rows: number, columns: number, outRows: number, outColumns: number, dst: Float32Array): void {
  const ys = axisMap(rows, outRows);
  const xs = axisMap(columns, outColumns);
  const { i0: x0, i1: x1, w: wxs } = xs;
  for (let oy = 0; oy < outRows; oy++) {
    const top = rowAt(ys.i0[oy] as number);
    const bottom = rowAt(ys.i1[oy] as number);
    const wy = ys.w[oy] as number;
    const base = oy * outColumns;
    for (let ox = 0; ox < outColumns; ox++) {
      const c0 = x0[ox] as number;
      const c1 = x1[ox] as number;
      const wx = wxs[ox] as number;
      const t = (top[c0] as number) * (1 - wx) + (top[c1] as number) * wx;
      const b = (bottom[c0] as number) * (1 - wx) + (bottom[c1] as number) * wx;
      dst[base + ox] = t * (1 - wy) + b * wy;
    }
  }
}

export function resizeBilinear(src: Float32Array, rows: number, columns: number, outRows: number, outColumns: number, out?: Float32Array): Float32Array {
  if (src.length !== rows * columns) throw new RangeError(`expected ${rows * columns} values, got ${src.length}`);
  const dst = out ?? new Float32Array(outRows * outColumns);
  resizeRows((y) => src.subarray(y * columns, (y + 1) * columns), rows, columns, outRows, outColumns, dst);
  return dst;
}

export function normalisationFor(input: InputSpec, modality: string): Normalisation {
  const norm = input.normalisation[modality];
  if (norm === undefined) {
    throw new RangeError(`model has no input normalisation for modality ${modality} (has ${Object.keys(input.normalisation).join(', ')})`);
  }
  return norm;
}

/**
 * One slice -> H*W floats of model input: normalise then resize, fused. Only the source rows
 * the resize reads are normalised, each once, into two row buffers, so a slice costs no
 * intermediate image and a large frame downsampled to the model's grid is not normalised in
 * full. The numbers are those of normalising the whole frame first (float32 rows, as stored).
 */
export function preprocessSlice(image: ModalityImage, input: InputSpec, out?: Float32Array): Float32Array {
  const { values, rows, columns } = image;
  if (values.length !== rows * columns) {
    throw new RangeError(`image has ${values.length} values for ${rows}x${columns}`);
  }
  const { height, width } = input.size;
  const dst = out ?? new Float32Array(height * width);
  const stretch = stretchOf(values, image.rescale ?? IDENTITY, normalisationFor(input, image.modality));
  const buffers = [new Float32Array(columns), new Float32Array(columns)] as const;
  const held = [-1, -1];
  // The resize asks for an output row's top source row, then its bottom one: a miss fills the
  // slot not returned last, so the top row is never evicted while its bottom row is fetched.
  let last = 0;
  const rowAt = (y: number): Float32Array => {
    const hit = held[0] === y ? 0 : held[1] === y ? 1 : -1;
    if (hit >= 0) {
      last = hit;
      return buffers[hit as 0 | 1];
    }
    const slot = (1 - last) as 0 | 1;
    held[slot] = y;
    last = slot;
    stretchRow(values, y * columns, buffers[slot], stretch);
    return buffers[slot];
  };
  resizeRows(rowAt, rows, columns, height, width, dst);
  return dst;
}

/** All slices of a scan as one [N, 1, H, W] batch (the model's batch dimension is dynamic). */
export function preprocessBatch(images: readonly ModalityImage[], input: InputSpec): InputBatch {
  const { height, width } = input.size;
  const plane = height * width;
  const data = new Float32Array(images.length * plane);
  images.forEach((image, i) => {
    preprocessSlice(image, input, data.subarray(i * plane, (i + 1) * plane));
  });
  return { data, dims: [images.length, 1, height, width] };
}
