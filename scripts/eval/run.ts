/**
 * `npm run eval`: the bundled model (or --model DIR) on a phantom family it never trained on.
 *
 *   npm run eval [-- --model DIR] [--tune N] [--test N] [--out DIR] [--write-manifest] [--small]
 *
 * Two disjoint splits of the held-out family: the TUNE split (seeds 50,000,000+) fits the
 * calibration and chooses the operating points' thresholds; the TEST split (seeds 60,000,000+)
 * is only measured, and every figure reported comes from it. Writes evaluation.json, summary.md
 * and the plots (PNG and SVG) to --out (default eval/results/<model id>); --write-manifest puts
 * the calibration, operating points and held-out figures into the model's manifest.json.
 */
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { parseManifest, type Manifest, type OperatingPoint, type PlattScaling } from '#server/analysis/manifest.ts';
import { applyPlatt, fitPlatt, reliability, samples } from './calibration-fit.ts';
import { chooseThresholds, figuresAt, frocCurve, sensitivityTable, thinCurve, type FrocPoint } from './froc.ts';
import { analyse, candidateModel, generate, SCORE_FLOOR, type Split } from './heldout-run.ts';
import { matchSeries, type MatchedSeries } from './matching.ts';
import { frocSvg, reliabilitySvg, writePlots } from './plots.ts';
import type { ScoredSeries } from './truth.ts';

const ROOT = resolve(import.meta.dirname, '../..');
const DEFAULT_GENERATOR = join(ROOT, 'eval/heldout-phantoms/generate.py');
const FAMILY = 'the held-out phantom family (eval/heldout-phantoms/generate.py)';

/** The operating points offered, by false-positive budget per series on the tune split. */
const POINTS: readonly { name: string; display_name: string; description: string; budget: number }[] = [
  { name: 'high_sensitivity', display_name: 'High sensitivity (triage)', description: 'Misses the fewest lesions; expect about 2 false positives per series to dismiss. For worklist triage, where a miss costs more than a look.', budget: 2 },
  { name: 'balanced', display_name: 'Balanced', description: 'About one false positive every two series. The default.', budget: 0.5 },
  { name: 'high_specificity', display_name: 'High specificity', description: 'About one false positive every four series; misses more lesions. For second reads where false alarms cost reading time.', budget: 0.25 },
];
const DEFAULT_POINT = 'balanced';

export type EvalOptions = {
  modelDir: string;
  generator: string;
  tune: number;
  test: number;
  out: string;
  writeManifest: boolean;
  log: (line: string) => void;
};

const r4 = (v: number | null): number | null => (v === null ? null : Math.round(v * 1e4) / 1e4);

function calibrated(series: readonly ScoredSeries[], per: Readonly<Record<string, PlattScaling>>): ScoredSeries[] {
  return series.map((s) => ({ truth: s.truth, candidates: s.candidates.map((c) => ({ ...c, score: applyPlatt(per[c.label], c.score) })) }));
}

function frocOf(series: readonly MatchedSeries[], label?: string): { curve: FrocPoint[]; at: Record<string, number | null> } {
  const curve = frocCurve(series, { label });
  return { curve, at: sensitivityTable(curve) };
}

export type EvalResult = {
  evaluation: Record<string, unknown>;
  manifest: Manifest;
  pngs: string[];
};

export async function runEval(options: EvalOptions): Promise<EvalResult> {
  const { log } = options;
  const manifest = parseManifest(JSON.parse(readFileSync(join(options.modelDir, 'manifest.json'), 'utf8')), options.modelDir);
  const labels = manifest.labels.map((l) => l.label);
  const work = mkdtempSync(join(tmpdir(), 'mia-eval-'));
  try {
    const modelsDir = join(work, 'models');
    mkdirSync(modelsDir);
    const modelId = candidateModel(options.modelDir, modelsDir);
    const splits: Split[] = [
      { name: 'tune', seedBase: 50_000_000, series: options.tune },
      { name: 'test', seedBase: 60_000_000, series: options.test },
    ];
    const scored: Record<string, ScoredSeries[]> = {};
    for (const split of splits) {
      let t = performance.now();
      const dicom = join(work, `${split.name}-dicom`);
      const truth = generate(options.generator, split, dicom);
      log(`${split.name}: generated ${truth.series.length} series in ${((performance.now() - t) / 1000).toFixed(1)} s`);
      t = performance.now();
      scored[split.name] = await analyse(dicom, truth, { dataDir: join(work, `${split.name}-data`), modelsDir, modelId, log });
      log(`${split.name}: imported and analysed in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    }
    const tune = scored['tune'] as ScoredSeries[];
    const test = scored['test'] as ScoredSeries[];

    // Calibration from the tune split only.
    const rawTune = tune.map(matchSeries);
    const platt: Record<string, PlattScaling> = {};
    for (const label of labels) {
      const fit = fitPlatt(samples(rawTune, label));
      if (fit) platt[label] = fit;
    }
    const tuneCal = calibrated(tune, platt).map(matchSeries);
    const testRaw = test.map(matchSeries);
    const testCal = calibrated(test, platt).map(matchSeries);

    // Chosen from the smallest budget up, each label's threshold never above the last point's: a
    // point with a bigger budget then finds at least the same lesions on any data, as its name says.
    const nested = new Map<string, Record<string, number>>();
    let previous: Record<string, number> | null = null;
    for (const p of [...POINTS].sort((a, b) => a.budget - b.budget)) {
      const own = chooseThresholds(tuneCal, labels, p.budget);
      const prev: Record<string, number> | null = previous;
      const thresholds: Record<string, number> = prev ? Object.fromEntries(labels.map((l) => [l, Math.min(own[l] ?? 1, prev[l] ?? 1)])) : own;
      nested.set(p.name, thresholds);
      previous = thresholds;
    }
    const points: OperatingPoint[] = POINTS.map((p) => {
      const thresholds = nested.get(p.name) as Record<string, number>;
      const f = figuresAt(testCal, labels, thresholds);
      return {
        name: p.name,
        display_name: p.display_name,
        description: p.description,
        thresholds,
        measured: {
          on: `test split of ${FAMILY}, ${test.length} series; thresholds chosen on its tune split (${tune.length} series)`,
          series: f.series,
          lesions: f.lesions,
          sensitivity: r4(f.sensitivity),
          false_positives_per_series: r4(f.false_positives_per_series) as number,
          per_label: Object.fromEntries(Object.entries(f.per_label).map(([l, v]) => [l, { lesions: v.lesions, sensitivity: r4(v.sensitivity), false_positives_per_series: r4(v.false_positives_per_series) as number }])),
        },
      };
    });
    const balanced = points.find((p) => p.name === DEFAULT_POINT) as OperatingPoint;

    const overall = frocOf(testCal);
    const overallRaw = frocOf(testRaw);
    const perLabel = Object.fromEntries(labels.map((l) => [l, frocOf(testCal, l)]));
    const modalities = [...new Set(test.map((s) => s.truth.modality))].sort();
    const perModality = Object.fromEntries(
      modalities.map((m) => {
        const subset = testCal.filter((s) => s.modality === m);
        return [m, { series: subset.length, lesions: subset.reduce((n, s) => n + s.lesions.length, 0), ...frocOf(subset) }];
      }),
    );
    const relRaw = reliability(samples(testRaw));
    const relCal = reliability(samples(testCal));
    // What a reader sees: the findings at the default operating point.
    const shown = testCal.map((s) => ({ ...s, candidates: s.candidates.filter((c) => c.score >= (balanced.thresholds[c.label] ?? 1)) }));
    const relShown = reliability(samples(shown));
    const lesionsTest = testCal.reduce((n, s) => n + s.lesions.length, 0);

    const evaluation = {
      model: { id: manifest.id, version: manifest.version, sha256: manifest.file.sha256 },
      family: FAMILY,
      generator: basename(options.generator),
      matching: 'same label; key slice within one slice of the lesion; box centre inside the lesion box there or IoU >= 0.3; most confident first; a second finding on a found lesion is a duplicate (not a false positive)',
      score_floor: SCORE_FLOOR,
      splits: {
        tune: { seeds: `50000000-${50_000_000 + tune.length - 1}`, series: tune.length, lesions: rawTune.reduce((n, s) => n + s.lesions.length, 0), used_for: 'calibration and operating-point thresholds' },
        test: { seeds: `60000000-${60_000_000 + test.length - 1}`, series: test.length, lesions: lesionsTest, used_for: 'every figure below' },
      },
      goals: { sensitivity_at_0_5_fp: { goal: 0.95, measured: overall.at['0.5'] }, expected_calibration_error: { goal: 0.05, measured: relCal.ece } },
      sensitivity_at: overall.at,
      sensitivity_at_uncalibrated: overallRaw.at,
      per_label: Object.fromEntries(Object.entries(perLabel).map(([l, v]) => [l, { lesions: testCal.reduce((n, s) => n + s.lesions.filter((x) => x.label === l).length, 0), sensitivity_at: v.at }])),
      per_modality: Object.fromEntries(Object.entries(perModality).map(([m, v]) => [m, { series: v.series, lesions: v.lesions, sensitivity_at: v.at }])),
      per_kind_missed_at_default: Object.fromEntries(
        labels.map((l) => [l, testCal.reduce((n, s) => n + s.lesions.filter((x) => x.label === l && (x.bestScore === null || x.bestScore < (balanced.thresholds[l] ?? 1))).length, 0)]),
      ),
      calibration: {
        method: 'platt',
        per_label: platt,
        expected_calibration_error: relCal.ece,
        expected_calibration_error_uncalibrated: relRaw.ece,
        expected_calibration_error_at_default_point: relShown.ece,
        reliability: relCal.bins,
        reliability_uncalibrated: relRaw.bins,
        reliability_at_default_point: relShown.bins,
        findings: samples(testCal).length,
      },
      operating_points: points,
      froc: thinCurve(overall.curve, 120),
    };

    mkdirSync(options.out, { recursive: true });
    writeFileSync(join(options.out, 'evaluation.json'), `${JSON.stringify(evaluation, null, 2)}\n`);
    const marks = points.map((p) => ({ name: p.name, fp: p.measured?.false_positives_per_series ?? 0, sensitivity: p.measured?.sensitivity ?? 0 }));
    const title = `${manifest.id} ${manifest.version}`;
    const pngs = await writePlots([
      { path: join(options.out, 'froc.png'), svg: frocSvg(`${title}: FROC on held-out test split (${test.length} series, ${lesionsTest} lesions)`, [{ name: 'all labels', points: overall.curve }, ...labels.map((l) => ({ name: l, points: (perLabel[l] as { curve: FrocPoint[] }).curve }))], marks) },
      { path: join(options.out, 'froc-modality.png'), svg: frocSvg(`${title}: FROC by modality, held-out test split`, Object.entries(perModality).map(([m, v]) => ({ name: `${m} (${v.series} series)`, points: v.curve }))) },
      { path: join(options.out, 'reliability.png'), svg: reliabilitySvg(`${title}: reliability on held-out test split`, [{ name: 'calibrated', bins: relCal.bins, ece: relCal.ece }, { name: 'raw scores', bins: relRaw.bins, ece: relRaw.ece }, { name: 'shown (balanced point)', bins: relShown.bins, ece: relShown.ece }]) },
    ]);
    writeFileSync(join(options.out, 'summary.md'), summary(evaluation, labels, points));

    const updated = withEvaluation(manifest, platt, points, {
      family: FAMILY,
      series: test.length,
      lesions: lesionsTest,
      sensitivity_at: overall.at,
      froc: thinCurve(overall.curve, 120),
      reliability: relCal.bins,
      expected_calibration_error: relCal.ece,
      per_label: evaluation.per_label,
      per_modality: evaluation.per_modality,
    }, tune.length, samples(rawTune).length);
    if (options.writeManifest) {
      const path = join(options.modelDir, 'manifest.json');
      writeFileSync(path, `${JSON.stringify(updated, null, 2)}\n`);
      log(`wrote calibration, operating points and held-out figures into ${path}`);
    }
    return { evaluation, manifest: updated, pngs };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function withEvaluation(
  manifest: Manifest,
  platt: Record<string, PlattScaling>,
  points: OperatingPoint[],
  heldout: NonNullable<Manifest['metrics']['heldout']>,
  tuneSeries: number,
  tuneFindings: number,
): Manifest {
  const chosen = points.find((p) => p.name === DEFAULT_POINT) as OperatingPoint;
  const next: Manifest = {
    ...manifest,
    labels: manifest.labels.map((l) => ({ ...l, threshold: chosen.thresholds[l.label] ?? l.threshold })),
    metrics: { ...manifest.metrics, heldout },
    operating_points: points,
    default_operating_point: DEFAULT_POINT,
  };
  if (Object.keys(platt).length > 0) {
    next.calibration = { method: 'platt', fitted_on: `tune split of ${FAMILY}: ${tuneSeries} series, ${tuneFindings} candidate findings`, per_label: platt };
  } else {
    delete next.calibration;
  }
  // Round-trips through the schema: a manifest the server would refuse is never written.
  return parseManifest(JSON.parse(JSON.stringify(next)), 'evaluated manifest');
}

function pct(v: number | null | undefined): string {
  return v === null || v === undefined ? '-' : v.toFixed(3);
}

function summary(e: Record<string, unknown> & { sensitivity_at: Record<string, number | null> }, labels: readonly string[], points: readonly OperatingPoint[]): string {
  const ev = e as unknown as {
    model: { id: string; version: string };
    splits: { tune: { series: number; lesions: number }; test: { series: number; lesions: number } };
    goals: { sensitivity_at_0_5_fp: { measured: number | null }; expected_calibration_error: { measured: number } };
    sensitivity_at_uncalibrated: Record<string, number | null>;
    per_label: Record<string, { lesions: number; sensitivity_at: Record<string, number | null> }>;
    per_modality: Record<string, { series: number; lesions: number; sensitivity_at: Record<string, number | null> }>;
    calibration: { expected_calibration_error: number; expected_calibration_error_uncalibrated: number; expected_calibration_error_at_default_point: number; findings: number };
  };
  const rates = ['0.25', '0.5', '1', '2'];
  const lines = [
    `# ${ev.model.id} ${ev.model.version} on the held-out phantom family`,
    '',
    `Test split: ${ev.splits.test.series} series, ${ev.splits.test.lesions} lesions. Tune split (calibration, thresholds): ${ev.splits.tune.series} series, ${ev.splits.tune.lesions} lesions.`,
    '',
    `Goals: sensitivity >= 0.95 at 0.5 FP/series: **${pct(ev.goals.sensitivity_at_0_5_fp.measured)}**; ECE < 0.05: **${pct(ev.goals.expected_calibration_error.measured)}**.`,
    '',
    '| sensitivity at FP/series | 0.25 | 0.5 | 1 | 2 |',
    '|---|---|---|---|---|',
    `| all labels (calibrated) | ${rates.map((r) => pct(e.sensitivity_at[r])).join(' | ')} |`,
    `| all labels (raw scores) | ${rates.map((r) => pct(ev.sensitivity_at_uncalibrated[r])).join(' | ')} |`,
    ...labels.map((l) => `| ${l} (${ev.per_label[l]?.lesions ?? 0} lesions) | ${rates.map((r) => pct(ev.per_label[l]?.sensitivity_at[r])).join(' | ')} |`),
    ...Object.entries(ev.per_modality).map(([m, v]) => `| ${m} (${v.series} series, ${v.lesions} lesions) | ${rates.map((r) => pct(v.sensitivity_at[r])).join(' | ')} |`),
    '',
    `Calibration (${ev.calibration.findings} test findings above the score floor): ECE ${pct(ev.calibration.expected_calibration_error)} calibrated, ${pct(ev.calibration.expected_calibration_error_uncalibrated)} raw, ${pct(ev.calibration.expected_calibration_error_at_default_point)} over the findings shown at the balanced point.`,
    '',
    '| operating point | thresholds | sensitivity | FP/series |',
    '|---|---|---|---|',
    ...points.map((p) => `| ${p.name} | ${labels.map((l) => `${l.replace('_detected', '')} ${p.thresholds[l]}`).join(', ')} | ${pct(p.measured?.sensitivity)} | ${pct(p.measured?.false_positives_per_series)} |`),
    '',
    'Plots: froc.png, froc-modality.png, reliability.png.',
    '',
  ];
  return lines.join('\n');
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      model: { type: 'string', default: join(ROOT, 'models/mia-phantom-detector') },
      generator: { type: 'string', default: DEFAULT_GENERATOR },
      tune: { type: 'string' },
      test: { type: 'string' },
      out: { type: 'string' },
      'write-manifest': { type: 'boolean', default: false },
      small: { type: 'boolean', default: false },
    },
  });
  const count = (v: string | undefined, fallback: number, name: string): number => {
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 2 || n > 2000) throw new Error(`--${name}: expected a whole number from 2 to 2000, got ${v}`);
    return n;
  };
  const modelDir = resolve(values.model);
  const small = values.small;
  const started = performance.now();
  const result = await runEval({
    modelDir,
    generator: resolve(values.generator),
    tune: count(values.tune, small ? 24 : 200, 'tune'),
    test: count(values.test, small ? 36 : 300, 'test'),
    out: resolve(values.out ?? join(ROOT, 'eval/results', basename(modelDir))),
    writeManifest: values['write-manifest'],
    log: (line) => process.stderr.write(`${line}\n`),
  });
  const goals = result.evaluation['goals'] as { sensitivity_at_0_5_fp: { measured: number | null }; expected_calibration_error: { measured: number } };
  process.stdout.write(`sensitivity at 0.5 FP/series ${pct(goals.sensitivity_at_0_5_fp.measured)} (goal 0.95), ECE ${pct(goals.expected_calibration_error.measured)} (goal < 0.05); ${((performance.now() - started) / 1000).toFixed(0)} s\n`);
  process.stdout.write(`plots: ${result.pngs.join(', ') || '(SVG only: no Chromium)'}\n`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    process.stderr.write(`eval: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
}
