import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { calibratorOf } from '#server/analysis/calibration.ts';
import { parseManifest } from '#server/analysis/manifest.ts';
import { decisionOf } from '#server/analysis/operating-points.ts';
import { manifestIssues, MODEL_DIR } from './helpers.ts';

type Json = Record<string, unknown> & { labels: { label: string; threshold: number }[] };

async function bundled(): Promise<Json> {
  const json = JSON.parse(await readFile(join(MODEL_DIR, 'manifest.json'), 'utf8')) as Json;
  delete json['operating_points'];
  delete json['default_operating_point'];
  delete json['calibration'];
  return json;
}

const LABELS = ['tumor_detected', 'hemorrhage_detected', 'infarct_detected'];
const point = (name: string, t: number, only: readonly string[] = LABELS) => ({
  name,
  display_name: name,
  description: `${name} point`,
  thresholds: Object.fromEntries(only.map((l) => [l, t])),
});

describe('calibration', () => {
  const calibrator = calibratorOf({ method: 'platt', fitted_on: 'test', per_label: { tumor_detected: { a: 1.7, b: -0.4 } } });

  it('maps raw scores through Platt scaling and back, keeping their order', () => {
    const raw = [0.01, 0.2, 0.45, 0.5, 0.8, 0.99];
    const cal = raw.map((r) => calibrator.confidence('tumor_detected', r));
    expect([...cal].sort((a, b) => a - b)).toEqual(cal);
    cal.forEach((c, i) => expect(calibrator.rawThreshold('tumor_detected', c)).toBeCloseTo(raw[i] as number, 9));
    // sigmoid(1.7 * logit(0.5) - 0.4) = sigmoid(-0.4)
    expect(calibrator.confidence('tumor_detected', 0.5)).toBeCloseTo(1 / (1 + Math.exp(0.4)), 12);
  });

  it('leaves labels without a fit, and the ends of the scale, as they are', () => {
    expect(calibrator.confidence('infarct_detected', 0.37)).toBe(0.37);
    expect(calibrator.rawThreshold('infarct_detected', 0.37)).toBe(0.37);
    expect(calibrator.rawThreshold('tumor_detected', 0)).toBe(0);
    expect(calibrator.rawThreshold('tumor_detected', 1)).toBe(1);
    expect(calibratorOf(undefined).confidence('tumor_detected', 0.3)).toBe(0.3);
  });
});

describe('operating points in the manifest', () => {
  it('are chosen by name, else the default, else the labels\' own thresholds', async () => {
    const json = await bundled();
    const m = parseManifest({ ...json, operating_points: [point('triage', 0.2), point('balanced', 0.5)], default_operating_point: 'balanced' });
    expect(decisionOf(m, 'triage')).toEqual({ operatingPoint: 'triage', thresholds: Object.fromEntries(LABELS.map((l) => [l, 0.2])) });
    expect(decisionOf(m, null).operatingPoint).toBe('balanced');
    // A point the admin chose that a newer manifest dropped: the default, not an error at analysis time.
    expect(decisionOf(m, 'gone').operatingPoint).toBe('balanced');
    const plain = parseManifest(json);
    expect(decisionOf(plain, 'triage')).toEqual({ operatingPoint: null, thresholds: Object.fromEntries(json.labels.map((l) => [l.label, l.threshold])) });
  });

  it('refuse a point without a threshold for every label, naming the point', async () => {
    const json = await bundled();
    expect(manifestIssues({ ...json, operating_points: [point('triage', 0.2, ['tumor_detected'])] })).toEqual([
      'operating_points[0].thresholds: no threshold for hemorrhage_detected',
      'operating_points[0].thresholds: no threshold for infarct_detected',
    ]);
  });

  it('refuse unknown labels, duplicate names, a default that is not offered and thresholds off the unit interval', async () => {
    const json = await bundled();
    const extra = { ...point('triage', 0.2), thresholds: { ...point('triage', 0.2).thresholds, edema_detected: 0.3 } };
    expect(manifestIssues({ ...json, operating_points: [extra] })).toEqual(['operating_points[0].thresholds.edema_detected: edema_detected is not in labels']);
    expect(manifestIssues({ ...json, operating_points: [point('a', 0.2), point('a', 0.3)] })).toEqual(['operating_points[1].name: duplicate operating point a']);
    expect(manifestIssues({ ...json, operating_points: [point('a', 0.2)], default_operating_point: 'b' })).toEqual(['default_operating_point: b is not in operating_points']);
    expect(manifestIssues({ ...json, operating_points: [point('a', 1.2)] })[0]).toMatch(/^operating_points\[0\]\.thresholds\.tumor_detected: expected number between 0 and 1/);
    expect(manifestIssues({ ...json, default_operating_point: 'a' })).toEqual(['default_operating_point: a is not in operating_points']);
  });

  it('refuse a calibration for a label the model does not have, or one that reverses scores', async () => {
    const json = await bundled();
    expect(manifestIssues({ ...json, calibration: { method: 'platt', fitted_on: 'x', per_label: { edema_detected: { a: 1, b: 0 } } } })).toEqual([
      'calibration.per_label.edema_detected: edema_detected is not in labels',
    ]);
    expect(manifestIssues({ ...json, calibration: { method: 'platt', fitted_on: 'x', per_label: { tumor_detected: { a: -1, b: 0 } } } })[0]).toMatch(/^calibration\.per_label\.tumor_detected\.a: /);
  });
});
