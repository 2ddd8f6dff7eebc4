import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadManifest } from '#server/analysis/manifest.ts';
import { normalise, percentileSorted, preprocessBatch, preprocessSlice, resizeBilinear } from '#server/analysis/preprocess.ts';
import { MODEL_DIR, generatePhantoms, python, readFloat32, sliceOf, withTempDir } from './helpers.ts';
import { seededRandom } from '../helpers/random.ts';

describe('resizeBilinear', () => {
  it('is the identity at equal size', () => {
    const src = Float32Array.from({ length: 12 }, (_, i) => i * 1.5);
    expect(Array.from(resizeBilinear(src, 3, 4, 3, 4))).toEqual(Array.from(src));
  });

  it('averages 2x2 blocks when halving (half-pixel centres)', () => {
    const src = Float32Array.from([0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]);
    expect(Array.from(resizeBilinear(src, 4, 4, 2, 2))).toEqual([5, 9, 21, 25]);
  });

  it('clamps at the edges when enlarging', () => {
    expect(Array.from(resizeBilinear(Float32Array.from([0, 4]), 1, 2, 1, 4))).toEqual([0, 1, 3, 4]);
  });
});

describe('normalise', () => {
  it('windows CT and clips to 0..1', () => {
    const out = normalise(Float32Array.from([-1000, 0, 40, 80, 1200]), { kind: 'window', center: 40, width: 80, clip: [0, 1] });
    expect(Array.from(out)).toEqual([0, 0, 0.5, 1, 1]);
  });

  it('uses numpy linear percentiles for MR', () => {
    const sorted = Float64Array.from({ length: 11 }, (_, i) => i * 10);
    expect(percentileSorted(sorted, 50)).toBe(50);
    expect(percentileSorted(sorted, 25)).toBeCloseTo(25, 12);
    expect(percentileSorted(sorted, 100)).toBe(100);
    const flat = normalise(new Float32Array(9).fill(7), { kind: 'percentile', low: 1, high: 99.5, clip: [0, 1] });
    expect(Array.from(flat)).toEqual(new Array(9).fill(0));
  });
});

describe('preprocessSlice (normalise and resize fused, rescale folded in)', () => {
  it.each([
    ['CT, halving', 'CT', 64, 64, 32, 32, { slope: 1, intercept: -1024 }, 950],
    ['CT, odd sizes and enlarging', 'CT', 37, 53, 64, 40, { slope: 1, intercept: -1024 }, 950],
    ['CT, signed stored values (HU as stored)', 'CT', 48, 48, 24, 24, { slope: 1, intercept: 0 }, -1100],
    ['MR, fractional slope', 'MR', 96, 80, 128, 128, { slope: 2.5, intercept: 3 }, 0],
    ['MR, negative slope mirrors the ranks', 'MR', 50, 50, 20, 30, { slope: -1.5, intercept: 4000 }, 0],
    ['MR, signed stored values below zero', 'MR', 64, 48, 32, 32, { slope: 1, intercept: 0 }, -300],
  ] as const)('%s: equals rescaling, normalising the whole frame, then resizing', async (_name, modality, rows, columns, outRows, outColumns, rescale, base) => {
    // Float32 stored values, and the integer arrays decoders return (a lookup-table path).
    for (const Kind of base < 0 ? ([Float32Array, Int16Array] as const) : ([Float32Array, Int16Array, Uint16Array] as const)) {
      const manifest = await loadManifest(MODEL_DIR);
      const spec = { ...manifest.input, size: { height: outRows, width: outColumns } };
      const r = seededRandom(rows * 7 + columns);
      const stored = new Kind(rows * columns);
      for (let i = 0; i < stored.length; i++) stored[i] = Math.floor(r() * (modality === 'CT' ? 1200 : 900)) + base;
      const modalityValues = Float32Array.from(stored, (v) => v * rescale.slope + rescale.intercept);
      const expected = resizeBilinear(normalise(modalityValues, spec.normalisation[modality]!), rows, columns, outRows, outColumns);
      const actual = preprocessSlice({ values: stored, rows, columns, modality, rescale }, spec);
      expect(Array.from(actual), Kind.name).toEqual(Array.from(expected));
    }
  });

  it('8-bit stored values and a flat slice through the lookup tables', async () => {
    const manifest = await loadManifest(MODEL_DIR);
    const spec = { ...manifest.input, size: { height: 16, width: 16 } };
    const ramps = [Uint8Array.from({ length: 32 * 32 }, (_, i) => i % 251), Int8Array.from({ length: 32 * 32 }, (_, i) => (i % 251) - 125)];
    for (const ramp of ramps) {
      for (const modality of ['CT', 'MR'] as const) {
        const expected = resizeBilinear(normalise(Float32Array.from(ramp), spec.normalisation[modality]!), 32, 32, 16, 16);
        expect(Array.from(preprocessSlice({ values: ramp, rows: 32, columns: 32, modality, rescale: { slope: 1, intercept: 0 } }, spec)), `${ramp.constructor.name} ${modality}`).toEqual(Array.from(expected));
      }
    }
    const flat = preprocessSlice({ values: new Uint16Array(32 * 32).fill(300), rows: 32, columns: 32, modality: 'MR' }, spec);
    expect(flat.every((v) => v === 0)).toBe(true);
  });
});

describe('preprocess parity with models/mia-phantom-detector/preprocess.py', () => {
  it('gives the same input as training did, CT and MR, several sizes', async () => {
    const manifest = await loadManifest(MODEL_DIR);
    await withTempDir(async (dir) => {
      for (const [modality, size, seed] of [['CT', 192, 20_000_900], ['MR', 256, 20_000_901], ['MR', 100, 20_000_902]] as const) {
        const [series] = await generatePhantoms(dir, { seed, series: 1, modality, kinds: 'tumor', size });
        const k = Math.floor(series!.slices / 2);
        const expectedPath = join(dir, `expected-${seed}.f32`);
        await python([
          '-c',
          [
            'import sys, numpy as np',
            `sys.path.insert(0, ${JSON.stringify(MODEL_DIR)})`,
            'from preprocess import preprocess_slice',
            `v = np.fromfile(${JSON.stringify(join(dir, `raw-${seed}`, `series-${seed}.f32`))}, dtype="<f4").reshape(${series!.slices}, ${size}, ${size})`,
            `preprocess_slice(v[${k}], ${JSON.stringify(modality)}).astype("<f4").tofile(${JSON.stringify(expectedPath)})`,
          ].join('\n'),
        ]);
        const expected = await readFloat32(expectedPath);
        const actual = preprocessSlice({ values: sliceOf(series!, k), rows: size, columns: size, modality }, manifest.input);
        expect(actual.length).toBe(128 * 128);
        let maxDiff = 0;
        for (let i = 0; i < actual.length; i++) maxDiff = Math.max(maxDiff, Math.abs((actual[i] as number) - (expected[i] as number)));
        expect(maxDiff, `${modality} ${size}`).toBeLessThanOrEqual(1e-6);
      }
    });
  });

  it('batches slices as [N, 1, H, W] and refuses an unknown modality', async () => {
    const manifest = await loadManifest(MODEL_DIR);
    const img = { values: new Float32Array(64 * 64).fill(40), rows: 64, columns: 64, modality: 'CT' };
    const batch = preprocessBatch([img, img, img], manifest.input);
    expect(batch.dims).toEqual([3, 1, 128, 128]);
    expect(batch.data.every((v) => v === 0.5)).toBe(true);
    expect(() => preprocessSlice({ ...img, modality: 'US' }, manifest.input)).toThrow(/no input normalisation for modality US/);
  });
});
