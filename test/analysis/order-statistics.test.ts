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

  // Decoders return these arrays; they are counted over the type's whole domain in one pass.
  it.each([
    ['Uint16, 12-bit MR', Uint16Array, (r: () => number) => Math.floor(r() * 4096)],
    ['Uint16, whole domain', Uint16Array, (r: () => number) => (r() < 0.02 ? 65535 : Math.floor(r() * 65536))],
    ['Int16, non-negative', Int16Array, (r: () => number) => Math.floor(r() * 2000)],
    ['Int16, negatives to the extremes', Int16Array, (r: () => number) => (r() < 0.02 ? -32768 : r() < 0.02 ? 32767 : Math.floor(r() * 3000) - 1024)],
    ['Uint8', Uint8Array, (r: () => number) => Math.floor(r() * 256)],
    ['Int8 with negatives', Int8Array, (r: () => number) => Math.floor(r() * 256) - 128],
  ] as const)('%s: the percentiles and extremes equal those of a full sort, call after call', (_name, Kind, draw) => {
    const r = seededRandom(7);
    // Repeated calls share the counts: each must leave them clean for the next.
    for (const n of [1, 3, 4096, 65536, 65536, 777]) {
      const values = new Kind(n);
      for (let i = 0; i < n; i++) values[i] = draw(r);
      const full = Float64Array.from(values).sort();
      const ranks = percentileRanks(n, [1, 50, 99.5]);
      const { sorted: partial, min, max } = orderStatistics(values, ranks);
      expect([min, max]).toEqual([full[0], full[n - 1]]);
      for (const q of [1, 50, 99.5]) expect(percentileSorted(partial, q)).toBe(percentileSorted(full, q));
    }
  });
});
