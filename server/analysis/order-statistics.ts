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
 * Something as long as `values` that holds, at each of `ranks`, the value sorting would put
 * there. Other positions are unspecified: pass it only to readers of those ranks. Sparse, so a
 * slice's four percentile ranks do not cost a slice-sized array.
 */
export function sortedAtRanks(values: ArrayLike<number>, ranks: readonly number[]): ArrayLike<number> {
  const n = values.length;
  let min = Infinity;
  let max = -Infinity;
  let integral = true;
  for (let i = 0; i < n; i++) {
    const v = values[i] as number;
    if (v < min) min = v;
    if (v > max) max = v;
    if (integral && !Number.isInteger(v)) integral = false;
  }
  if (!integral || n === 0 || max - min >= MAX_HISTOGRAM_SPAN) return Float64Array.from(values).sort();
  const counts = new Uint32Array(max - min + 1);
  for (let i = 0; i < n; i++) {
    const k = (values[i] as number) - min;
    counts[k] = (counts[k] as number) + 1;
  }
  const out: Record<number, number> & { length: number } = { length: n };
  const wanted = [...ranks].sort((a, b) => a - b);
  let seen = 0;
  let r = 0;
  for (let bin = 0; bin < counts.length && r < wanted.length; bin++) {
    seen += counts[bin] as number;
    while (r < wanted.length && (wanted[r] as number) < seen) {
      out[wanted[r] as number] = bin + min;
      r += 1;
    }
  }
  return out;
}
