/**
 * The held-out evaluation, small: the bundled model on the independent phantom family's tune and
 * test splits through mia's own import and analysis (scripts/eval/run.ts). `npm run eval` runs the
 * same code on 200 + 300 series and commits its figures; here a few dozen series check that the
 * whole chain works and that the model still finds most lesions of a family it never saw.
 */
import { mkdtempSync, readFileSync, rmSync, copyFileSync, mkdirSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseManifest, type Manifest } from '#server/analysis/manifest.ts';
import { runEval, type EvalResult } from '../../scripts/eval/run.ts';
import { REPO_ROOT } from '../analysis/helpers.ts';
import { readPng } from '../helpers/png.ts';

let dir: string;
let modelDir: string;
let result: EvalResult;
const log: string[] = [];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-eval-test-'));
  // A copy of the model folder, so --write-manifest never touches the committed one.
  modelDir = join(dir, 'mia-phantom-detector');
  mkdirSync(modelDir);
  const bundled = join(REPO_ROOT, 'models', 'mia-phantom-detector');
  for (const f of readdirSync(bundled)) copyFileSync(join(bundled, f), join(modelDir, f));
  result = await runEval({
    modelDir,
    generator: join(REPO_ROOT, 'eval', 'heldout-phantoms', 'generate.py'),
    tune: 16,
    test: 24,
    out: join(dir, 'out'),
    writeManifest: true,
    log: (line) => log.push(line),
  });
});

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('held-out evaluation (small)', () => {
  it('measures the test split only, with thresholds and calibration from the disjoint tune split', () => {
    const e = result.evaluation as any;
    expect(e.splits.tune).toMatchObject({ seeds: '50000000-50000015', series: 16 });
    expect(e.splits.test).toMatchObject({ seeds: '60000000-60000023', series: 24 });
    expect(e.splits.test.lesions).toBeGreaterThan(10);
    for (const rate of ['0.25', '0.5', '1', '2']) expect(e.sensitivity_at[rate]).toBeGreaterThanOrEqual(0);
    // FROC is monotone: more false positives allowed never finds fewer lesions.
    expect(e.sensitivity_at['2']).toBeGreaterThanOrEqual(e.sensitivity_at['0.5']);
    expect(e.sensitivity_at['0.5']).toBeGreaterThanOrEqual(e.sensitivity_at['0.25']);
    // A broken chain (wrong slices, boxes or labels) finds next to nothing; this model finds about
    // half at 2 false positives per series (0.46 on these seeds, 0.53 on the full 300-series run).
    expect(e.sensitivity_at['2']).toBeGreaterThan(0.3);
    expect(Object.keys(e.per_modality).sort()).toEqual(['CT', 'MR']);
    expect(e.calibration.expected_calibration_error).toBeLessThan(e.calibration.expected_calibration_error_uncalibrated + 0.05);
  });

  it('writes the figures and the plots as PNG images', () => {
    const out = join(dir, 'out');
    const evaluation = JSON.parse(readFileSync(join(out, 'evaluation.json'), 'utf8'));
    expect(evaluation.model.id).toBe('mia-phantom-detector');
    expect(result.pngs.map((p) => p.slice(out.length + 1)).sort()).toEqual(['froc-modality.png', 'froc.png', 'reliability.png']);
    for (const path of result.pngs) {
      const png = readPng(readFileSync(path));
      expect([png.width, png.height]).toEqual([640, 480]);
    }
    expect(readFileSync(join(out, 'summary.md'), 'utf8')).toMatch(/Goals: sensitivity >= 0\.95 at 0\.5 FP\/series/);
  });

  it('writes a manifest the server accepts, with operating points measured on the test split', () => {
    const written: Manifest = parseManifest(JSON.parse(readFileSync(join(modelDir, 'manifest.json'), 'utf8')));
    expect(written.operating_points?.map((p) => p.name)).toEqual(['high_sensitivity', 'balanced', 'high_specificity']);
    expect(written.default_operating_point).toBe('balanced');
    const balanced = written.operating_points?.find((p) => p.name === 'balanced');
    expect(written.labels.map((l) => l.threshold)).toEqual(written.labels.map((l) => balanced?.thresholds[l.label]));
    expect(balanced?.measured).toMatchObject({ series: 24 });
    // Points are nested: a bigger false-positive budget finds at least the lesions a smaller one does.
    const [high, mid, low] = written.operating_points ?? [];
    expect(high?.measured?.sensitivity ?? 0).toBeGreaterThanOrEqual(mid?.measured?.sensitivity ?? 0);
    expect(mid?.measured?.sensitivity ?? 0).toBeGreaterThanOrEqual(low?.measured?.sensitivity ?? 0);
    expect(written.metrics.heldout?.series).toBe(24);
    expect(written.metrics.heldout?.froc.length).toBeGreaterThan(0);
  });
});
