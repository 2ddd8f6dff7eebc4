import { describe, expect, it } from 'vitest';
import { orderStatistics, percentileRanks } from '#server/analysis/order-statistics.ts';
import { percentileSorted } from '#server/analysis/preprocess.ts';
import { seededRandom } from '../helpers/random.ts';


describe('order statistics without a full sort', () => {
  it.each([
    ['integer MR-like values', (r: () => number) => Math.floor(r() * 1400)],
    ['negative integers (CT HU)', (r: () => number) => Math.floor(r() * 3000) - 1024],
    ['non-integers (sorted fallback)', (r: () => number) => r() * 100],
    ['a few distinct values', (r: () => number) => (r() < 0.9 ? 0 : 500)],
  ])('%s: the percentiles equal those of a full sort', (_name, draw) => {
    const r = seededRandom(42);
    for (const n of [1, 2, 7, 4096, 65536]) {
      const values = Float32Array.from({ length: n }, () => draw(r));
      const full = Float64Array.from(values).sort();
      const { sorted: partial, min, max } = orderStatistics(values, percentileRanks(n, [1, 99.5]));
      expect([min, max]).toEqual([full[0], full[n - 1]]);
      for (const q of [1, 99.5]) expect(percentileSorted(partial, q)).toBe(percentileSorted(full, q));
    }
  });
});
