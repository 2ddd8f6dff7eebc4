/**
 * Slice -> model input, as the manifest's `input` section describes. This must reproduce
 * models/mia-phantom-detector/preprocess.py (the training-time reference) operation for
 * operation: a model sees exactly the numbers it was trained on or its thresholds mean nothing.
 * test/analysis/preprocess.test.ts runs both on the same slice and compares.
 */
import type { InputSpec, Normalisation } from '#server/analysis/manifest.ts';
import { percentileRanks, sortedAtRanks } from '#server/analysis/order-statistics.ts';

/** Decoded modality values of one frame (HU for CT, stored values for MR), row-major. */
export type ModalityImage = {
  values: Float32Array;
  rows: number;
  columns: number;
  modality: string;
};

export type InputBatch = {
  data: Float32Array;
  dims: [number, number, number, number];
};

/**
 * numpy.percentile's default ('linear') for one q in 0..100 on sorted values, including its
 * lerp form (a + d*t below t = 0.5, b - d*(1-t) from it) so results agree to the last bit.
 */
export function percentileSorted(sorted: Float64Array, q: number): number {
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

export function normalise(values: Float32Array, norm: Normalisation): Float32Array {
  const out = new Float32Array(values.length);
  const [clipLo, clipHi] = norm.clip;
  let lo: number;
  let span: number;
  if (norm.kind === 'window') {
    lo = norm.center - norm.width / 2;
    span = norm.width;
  } else {
    // Exact at the ranks percentileSorted reads, without a full sort (order-statistics.ts).
    const sorted = sortedAtRanks(values, percentileRanks(values.length, [norm.low, norm.high]));
    lo = percentileSorted(sorted, norm.low);
    const hi = percentileSorted(sorted, norm.high);
    span = hi - lo;
    // A flat slice (blank frame) has no contrast to stretch; the reference maps it to zeros.
    if (span < 1e-6) {
      out.fill(Math.min(Math.max(0, clipLo), clipHi));
      return out;
    }
  }
  for (let i = 0; i < values.length; i++) {
    const v = ((values[i] as number) - lo) / span;
    out[i] = v < clipLo ? clipLo : v > clipHi ? clipHi : v;
  }
  return out;
}

type AxisMap = { i0: Int32Array; i1: Int32Array; w: Float64Array };

function axisMap(nIn: number, nOut: number): AxisMap {
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
  return { i0, i1, w };
}

/** Bilinear, half-pixel centres, edges clamped, no antialiasing (the reference's definition). */
export function resizeBilinear(src: Float32Array, rows: number, columns: number, outRows: number, outColumns: number, out?: Float32Array): Float32Array {
  if (src.length !== rows * columns) throw new RangeError(`expected ${rows * columns} values, got ${src.length}`);
  const dst = out ?? new Float32Array(outRows * outColumns);
  const ys = axisMap(rows, outRows);
  const xs = axisMap(columns, outColumns);
  for (let oy = 0; oy < outRows; oy++) {
    const r0 = (ys.i0[oy] as number) * columns;
    const r1 = (ys.i1[oy] as number) * columns;
    const wy = ys.w[oy] as number;
    for (let ox = 0; ox < outColumns; ox++) {
      const c0 = xs.i0[ox] as number;
      const c1 = xs.i1[ox] as number;
      const wx = xs.w[ox] as number;
      const top = (src[r0 + c0] as number) * (1 - wx) + (src[r0 + c1] as number) * wx;
      const bottom = (src[r1 + c0] as number) * (1 - wx) + (src[r1 + c1] as number) * wx;
      dst[oy * outColumns + ox] = top * (1 - wy) + bottom * wy;
    }
  }
  return dst;
}

export function normalisationFor(input: InputSpec, modality: string): Normalisation {
  const norm = input.normalisation[modality];
  if (norm === undefined) {
    throw new RangeError(`model has no input normalisation for modality ${modality} (has ${Object.keys(input.normalisation).join(', ')})`);
  }
  return norm;
}

/** One slice -> H*W floats of model input. */
export function preprocessSlice(image: ModalityImage, input: InputSpec, out?: Float32Array): Float32Array {
  if (image.values.length !== image.rows * image.columns) {
    throw new RangeError(`image has ${image.values.length} values for ${image.rows}x${image.columns}`);
  }
  const normalised = normalise(image.values, normalisationFor(input, image.modality));
  return resizeBilinear(normalised, image.rows, image.columns, input.size.height, input.size.width, out);
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
