/**
 * Slice -> model input, as the manifest's `input` section describes. This must reproduce
 * models/mia-phantom-detector/preprocess.py (the training-time reference) operation for
 * operation: a model sees exactly the numbers it was trained on or its thresholds mean nothing.
 * test/analysis/preprocess.test.ts runs both on the same slice and compares.
 */
import type { InputSpec, Normalisation } from '#server/analysis/manifest.ts';
import { integerDomain, orderStatistics, percentileRanks, type SmallIntegers } from '#server/analysis/order-statistics.ts';

/**
 * One frame, row-major. `values` are modality values (HU for CT, stored values for MR) or,
 * given `rescale`, stored values - as float32, or the decoder's own 8/16-bit integers - whose
 * modality values are fround(v * slope + intercept) (PS3.3 C.11.1): rescaling while
 * normalising saves a pass over the frame, and integers index a lookup table.
 */
export type ModalityImage = {
  values: SliceValues;
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

/** A frame's values: float32 (modality values, or stored values of any depth), or small integers. */
export type SliceValues = Float32Array | SmallIntegers;

/** v -> (fround(v * slope + intercept) - lo) / span, clipped; `span` 0 marks a flat slice. */
type StretchNumbers = { slope: number; intercept: number; lo: number; span: number; clipLo: number; clipHi: number };

/**
 * The stretch of 8/16-bit stored values as a table over the type's whole domain, at
 * value + offset: a pixel costs one lookup, with no bounds check and no branch, in place of a
 * multiply, a division and two comparisons. Only entries for values that occur are read.
 */
type Table = { table: Float32Array; offset: number };

type Stretch = StretchNumbers & { table: Table | null };

const IDENTITY = { slope: 1, intercept: 0 } as const;

function stretchValue(v: number, s: StretchNumbers): number {
  const x = (Math.fround(v * s.slope + s.intercept) - s.lo) / s.span;
  return x < s.clipLo ? s.clipLo : x > s.clipHi ? s.clipHi : x;
}

/** The first v in [from, to] where `changed(v)` holds, for a predicate false then true; to + 1 if never. */
function firstWhere(from: number, to: number, changed: (v: number) => boolean): number {
  let lo = from;
  let hi = to + 1;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    if (changed(mid)) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/**
 * Fills the table's entries for stored values in [min, max] (rounded to float32 like the rows
 * they stand for). The clipped stretch is constant below some value and above another, so
 * only the values between are computed; the rest is two fills.
 */
function fillTable(t: Table, s: StretchNumbers, min: number, max: number): void {
  const below = Math.fround(stretchValue(min, s));
  const above = Math.fround(stretchValue(max, s));
  // Monotone either way round (a negative slope mirrors it).
  const first = firstWhere(min, max, (v) => Math.fround(stretchValue(v, s)) !== below);
  const pastLast = firstWhere(first, max, (v) => Math.fround(stretchValue(v, s)) === above);
  const { table, offset } = t;
  table.fill(below, min + offset, first + offset);
  for (let v = first; v < pastLast; v++) table[v + offset] = stretchValue(v, s);
  table.fill(above, pastLast + offset, max + 1 + offset);
}

/** Window tables depend only on the value domain and the numbers: one per series, kept. */
const windowTables = new Map<string, Table>();

function windowTable(values: SmallIntegers, s: StretchNumbers): Table {
  const { min, max, offset } = integerDomain(values);
  const key = `${min}:${max}:${s.slope}:${s.intercept}:${s.lo}:${s.span}:${s.clipLo}:${s.clipHi}`;
  let table = windowTables.get(key);
  if (!table) {
    if (windowTables.size >= 16) windowTables.clear();
    table = { table: new Float32Array(max - min + 1), offset };
    fillTable(table, s, min, max);
    windowTables.set(key, table);
  }
  return table;
}

/** A percentile stretch differs per slice: one table, refilled over each slice's [min, max]. */
let sliceTable = new Float32Array(0);

function percentileTable(values: SmallIntegers, s: StretchNumbers, min: number, max: number): Table {
  const domain = integerDomain(values);
  if (sliceTable.length < domain.max - domain.min + 1) sliceTable = new Float32Array(65536);
  const table = { table: sliceTable, offset: domain.offset };
  fillTable(table, s, min, max);
  return table;
}

function stretchOf(values: SliceValues, rescale: { slope: number; intercept: number }, norm: Normalisation): Stretch {
  const { slope, intercept } = rescale;
  const [clipLo, clipHi] = norm.clip;
  const small = values instanceof Float32Array ? null : values;
  if (norm.kind === 'window') {
    const s = { slope, intercept, lo: norm.center - norm.width / 2, span: norm.width, clipLo, clipHi };
    return { ...s, table: small ? windowTable(small, s) : null };
  }
  // Percentiles of the modality values from order statistics of the stored ones: the rescale
  // is monotone, so it maps rank r to rank r (slope > 0) or to rank n-1-r (slope < 0).
  const n = values.length;
  const ranks = percentileRanks(n, [norm.low, norm.high]);
  const mirrored = slope < 0;
  const storedRanks = mirrored ? ranks.map((r) => n - 1 - r) : ranks;
  const stats = orderStatistics(values, storedRanks);
  const sorted: Record<number, number> & { length: number } = { length: n };
  for (const r of ranks) sorted[r] = Math.fround((stats.sorted[mirrored ? n - 1 - r : r] as number) * slope + intercept);
  const lo = percentileSorted(sorted, norm.low);
  const spread = percentileSorted(sorted, norm.high) - lo;
  // A flat slice (blank frame) has no contrast to stretch; the reference maps it to zeros.
  const s = { slope, intercept, lo, span: spread < 1e-6 ? 0 : spread, clipLo, clipHi };
  return { ...s, table: small && s.span !== 0 ? percentileTable(small, s, stats.min, stats.max) : null };
}

/** One row of normalised values, rounded to float32 as the reference stores them. */
function stretchRow(values: SliceValues, start: number, out: Float32Array, s: StretchNumbers): void {
  if (s.span === 0) {
    out.fill(Math.min(Math.max(0, s.clipLo), s.clipHi));
    return;
  }
  const { slope, intercept, lo, span, clipLo, clipHi } = s;
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

/**
 * `pairs` when output index i reads source first + i * stride and the next one, always with the
 * same weight on the next one (an integer-factor downsample with an even factor); else null.
 */
type Pairs = { first: number; stride: number; weight: number };
type AxisMap = { i0: Int32Array; i1: Int32Array; w: Float64Array; pairs: Pairs | null };

const axisMaps = new Map<string, AxisMap>();

function pairsOf(i0: Int32Array, i1: Int32Array, w: Float64Array): Pairs | null {
  if (i0.length === 0) return null;
  const first = i0[0] as number;
  const stride = i0.length > 1 ? (i0[1] as number) - first : 1;
  const weight = w[0] as number;
  for (let i = 0; i < i0.length; i++) {
    if (i0[i] !== first + i * stride || i1[i] !== first + i * stride + 1 || w[i] !== weight) return null;
  }
  return { first, stride, weight };
}

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
  const map = { i0, i1, w, pairs: pairsOf(i0, i1, w) };
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
 * The resize reading each source pixel's stretch straight from the table: four lookups per
 * output pixel and no intermediate rows. The same numbers as stretching whole rows first, since
 * an entry is the float32 a row would hold. resizeRows's loop, written out again on purpose: a
 * lookup callback per pixel would cost more than the lookups themselves.
 */
function resizeThroughTable(values: SmallIntegers, t: Table, rows: number, columns: number, outRows: number, outColumns: number, dst: Float32Array): void {
  const ys = axisMap(rows, outRows);
  const xs = axisMap(columns, outColumns);
  const { table, offset } = t;
  if (xs.pairs !== null) {
    resizePairsThroughTable(values, table, offset, ys, xs.pairs, columns, outRows, outColumns, dst);
    return;
  }
  const { i0: x0, i1: x1, w: wxs } = xs;
  for (let oy = 0; oy < outRows; oy++) {
    const top = (ys.i0[oy] as number) * columns;
    const bottom = (ys.i1[oy] as number) * columns;
    const wy = ys.w[oy] as number;
    const base = oy * outColumns;
    for (let ox = 0; ox < outColumns; ox++) {
      const c0 = x0[ox] as number;
      const c1 = x1[ox] as number;
      const wx = wxs[ox] as number;
      const a = (table[(values[top + c0] as number) + offset] as number) * (1 - wx) + (table[(values[top + c1] as number) + offset] as number) * wx;
      const b = (table[(values[bottom + c0] as number) + offset] as number) * (1 - wx) + (table[(values[bottom + c1] as number) + offset] as number) * wx;
      dst[base + ox] = a * (1 - wy) + b * wy;
    }
  }
}

/**
 * resizeThroughTable where output column i reads source columns first + i * stride and the next
 * at one weight (an even-factor downsample: 256 -> 128 halves at weight 0.5): the same products
 * and sums in the same order, without loading three column indices and a weight per pixel. The
 * resize is most of this thread's work per slice, and that work runs beside inference on a
 * 2-core machine.
 */
function resizePairsThroughTable(
  values: SmallIntegers,
  table: Float32Array,
  offset: number,
  ys: AxisMap,
  xs: Pairs,
  columns: number,
  outRows: number,
  outColumns: number,
  dst: Float32Array,
): void {
  const { first, stride, weight: wx } = xs;
  const vx = 1 - wx;
  for (let oy = 0; oy < outRows; oy++) {
    let p = (ys.i0[oy] as number) * columns + first;
    let q = (ys.i1[oy] as number) * columns + first;
    const wy = ys.w[oy] as number;
    const vy = 1 - wy;
    const base = oy * outColumns;
    for (let ox = 0; ox < outColumns; ox++, p += stride, q += stride) {
      const a = (table[(values[p] as number) + offset] as number) * vx + (table[(values[p + 1] as number) + offset] as number) * wx;
      const b = (table[(values[q] as number) + offset] as number) * vx + (table[(values[q + 1] as number) + offset] as number) * wx;
      dst[base + ox] = a * vy + b * wy;
    }
  }
}

/**
 * One slice -> H*W floats of model input: normalise then resize, fused, with the numbers of
 * normalising the whole frame first (float32, as stored) and then resizing. 8/16-bit stored
 * values go through a lookup table; float32 ones are normalised a source row at a time, only
 * the rows the resize reads, each once, into two row buffers.
 */
export function preprocessSlice(image: ModalityImage, input: InputSpec, out?: Float32Array): Float32Array {
  const { values, rows, columns } = image;
  if (values.length !== rows * columns) {
    throw new RangeError(`image has ${values.length} values for ${rows}x${columns}`);
  }
  const { height, width } = input.size;
  const dst = out ?? new Float32Array(height * width);
  const stretch = stretchOf(values, image.rescale ?? IDENTITY, normalisationFor(input, image.modality));
  if (stretch.span === 0) {
    // A flat slice; resizing a constant gives it back (float32 absorbs float64 round-off).
    return dst.fill(Math.min(Math.max(0, stretch.clipLo), stretch.clipHi));
  }
  if (stretch.table && !(values instanceof Float32Array)) {
    resizeThroughTable(values, stretch.table, rows, columns, height, width, dst);
    return dst;
  }
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
