/**
 * Exact order statistics without sorting. An MR slice's percentile stretch (preprocess.ts) reads
 * two neighbouring ranks per percentile; sorting 65k values for four numbers costs ~4 ms a slice,
 * more than the model's inference. Integer-valued slices (all stored DICOM values, and rescaled
 * ones with integer slope and intercept) are counted into a histogram instead: O(n), and the
 * value at each rank is exactly the sorted array's.
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
const isIntegerArray = (values: ArrayLike<number>): boolean =>
  values instanceof Int8Array || values instanceof Uint8Array || values instanceof Int16Array || values instanceof Uint16Array || values instanceof Int32Array || values instanceof Uint32Array;

function allIntegers(values: ArrayLike<number>): boolean {
  for (let i = 0; i < values.length; i++) if (!Number.isInteger(values[i] as number)) return false;
  return true;
}

/** Reused between slices: a series asks again and again over the same value range. */
let histogram = new Uint32Array(0);

export function orderStatistics(values: ArrayLike<number>, ranks: readonly number[]): OrderStatistics {
  const n = values.length;
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
  const counts = histogram;
  for (let i = 0; i < n; i++) {
    const k = (values[i] as number) - min;
    counts[k] = (counts[k] as number) + 1;
  }
  const sorted: Record<number, number> & { length: number } = { length: n };
  const wanted = [...ranks].sort((a, b) => a - b);
  let seen = 0;
  let r = 0;
  for (let bin = 0; bin < size; bin++) {
    seen += counts[bin] as number;
    // Cleared while read, for the next caller.
    counts[bin] = 0;
    while (r < wanted.length && (wanted[r] as number) < seen) {
      sorted[wanted[r] as number] = bin + min;
      r += 1;
    }
  }
  return { sorted, min, max };
}
