/**
 * Exact order statistics without sorting. An MR slice's percentile stretch (preprocess.ts) reads
 * two neighbouring ranks per percentile; sorting 65k values for four numbers costs ~4 ms a slice,
 * more than the model's inference. Integer-valued slices (all stored DICOM values, and rescaled
 * ones with integer slope and intercept) are counted into a histogram instead: O(n), and the
 * value at each rank is exactly the sorted array's. The 8- and 16-bit arrays decoders return
 * are counted over their whole domain in a single pass (no pass for the extremes first).
 */

/** Largest value range counted in a histogram (16 MB of counts); wider ranges are sorted. */
const MAX_HISTOGRAM_SPAN = 1 << 22;

/** The ranks numpy's linear percentile reads for each q (floor and floor + 1 of q/100 * (n-1)). */
export function percentileRanks(n: number, qs: readonly number[]): number[] {
  const ranks = new Set<number>();
  for (const q of qs) {
    const index = (q / 100) * (n - 1);
    const lo = Math.floor(index);
    ranks.add(lo);
    ranks.add(Math.min(lo + 1, n - 1));
  }
  return [...ranks].sort((a, b) => a - b);
}

/**
 * `sorted` is as long as `values` and holds, at each of `ranks`, the value sorting would put
 * there; other positions are unspecified: pass it only to readers of those ranks (sparse, so a
 * slice's four percentile ranks do not cost a slice-sized array). `min` and `max` are the
 * extremes of `values`.
 */
export type OrderStatistics = { sorted: ArrayLike<number>; min: number; max: number };

/** Integer typed arrays need no check that their values are integers. */
const isIntegerArray = (values: ArrayLike<number>): boolean => values instanceof Int32Array || values instanceof Uint32Array;

function allIntegers(values: ArrayLike<number>): boolean {
  for (let i = 0; i < values.length; i++) if (!Number.isInteger(values[i] as number)) return false;
  return true;
}

/** Reused between slices, all zeros between calls: a series asks again and again. */
let histogram = new Uint32Array(0);
let domainCounts = new Uint32Array(0);

/** Visits `counts[from..to]` in order, zeroing them, and reads off the ranks and the extremes. */
function readCounts(counts: Uint32Array, from: number, to: number, valueOf0: number, n: number, ranks: readonly number[]): OrderStatistics {
  const sorted: Record<number, number> & { length: number } = { length: n };
  const wanted = [...ranks].sort((a, b) => a - b);
  let min = Infinity;
  let max = -Infinity;
  let seen = 0;
  let r = 0;
  for (let bin = from; bin <= to; bin++) {
    const count = counts[bin] as number;
    if (count === 0) continue;
    counts[bin] = 0;
    const value = bin + valueOf0;
    if (seen === 0) min = value;
    max = value;
    seen += count;
    while (r < wanted.length && (wanted[r] as number) < seen) {
      sorted[wanted[r] as number] = value;
      r += 1;
    }
  }
  return { sorted, min, max };
}

/** Stored values decoders return for nearly every CT and MR frame: 8- and 16-bit integers. */
export type SmallIntegers = Int8Array | Uint8Array | Int16Array | Uint16Array;

const isSmallIntegers = (values: ArrayLike<number>): values is SmallIntegers =>
  values instanceof Int8Array || values instanceof Uint8Array || values instanceof Int16Array || values instanceof Uint16Array;

/** The values a type holds, and the offset that makes the smallest an index of 0. */
export function integerDomain(values: SmallIntegers): { min: number; max: number; offset: number } {
  if (values instanceof Int8Array) return { min: -128, max: 127, offset: 128 };
  if (values instanceof Uint8Array) return { min: 0, max: 255, offset: 0 };
  if (values instanceof Int16Array) return { min: -32768, max: 32767, offset: 32768 };
  return { min: 0, max: 65535, offset: 0 };
}

const WAYS = 4;

/**
 * One pass: count at value + offset over the type's whole domain while OR-ing the values, which
 * bounds the largest from above, so the read-off visits only bins up to that bound (12-bit MR:
 * 4096 of 65536) unless some value is negative. Neighbouring pixels count into different
 * arrays: increments of one bin back to back would each wait for the last (one array measured
 * a third slower on phantom MR slices, whose black background is one value).
 */
function smallIntegerStatistics(values: SmallIntegers, ranks: readonly number[]): OrderStatistics {
  const { min, max, offset } = integerDomain(values);
  const domain = max - min + 1;
  if (domainCounts.length < WAYS * domain) domainCounts = new Uint32Array(WAYS * 65536);
  const c = domainCounts;
  const n = values.length;
  const [o0, o1, o2, o3] = [offset, offset + domain, offset + 2 * domain, offset + 3 * domain];
  let bits = 0;
  let i = 0;
  for (; i + 3 < n; i += 4) {
    const a = values[i] as number;
    const b = values[i + 1] as number;
    const d = values[i + 2] as number;
    const e = values[i + 3] as number;
    bits |= a | b | d | e;
    c[a + o0] = (c[a + o0] as number) + 1;
    c[b + o1] = (c[b + o1] as number) + 1;
    c[d + o2] = (c[d + o2] as number) + 1;
    c[e + o3] = (c[e + o3] as number) + 1;
  }
  for (; i < n; i++) {
    const v = values[i] as number;
    bits |= v;
    c[v + o0] = (c[v + o0] as number) + 1;
  }
  // A negative value sets the sign bit of the OR: then the negative half is read too.
  const from = bits < 0 ? 0 : offset;
  const to = bits < 0 ? domain - 1 : offset + bits;
  // The other arrays are folded into the first, which readCounts reads and clears.
  for (let bin = from; bin <= to; bin++) {
    c[bin] = (c[bin] as number) + (c[bin + domain] as number) + (c[bin + 2 * domain] as number) + (c[bin + 3 * domain] as number);
    c[bin + domain] = 0;
    c[bin + 2 * domain] = 0;
    c[bin + 3 * domain] = 0;
  }
  return readCounts(c, from, to, -offset, n, ranks);
}

export function orderStatistics(values: ArrayLike<number>, ranks: readonly number[]): OrderStatistics {
  const n = values.length;
  if (n > 0 && isSmallIntegers(values)) return smallIntegerStatistics(values, ranks);
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < n; i++) {
    const v = values[i] as number;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  if ((!isIntegerArray(values) && !allIntegers(values)) || n === 0 || max - min >= MAX_HISTOGRAM_SPAN) return { sorted: Float64Array.from(values).sort(), min, max };
  // Counted over the range the values span, so the counts stay in cache.
  const size = max - min + 1;
  if (histogram.length < size) histogram = new Uint32Array(size);
  for (let i = 0; i < n; i++) {
    const k = (values[i] as number) - min;
    histogram[k] = (histogram[k] as number) + 1;
  }
  return readCounts(histogram, 0, size - 1, min, n, ranks);
}
