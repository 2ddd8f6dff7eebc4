/**
 * A copy of the bundled model installed as a user model with operating points and a calibration
 * of its own, so tests of choosing a point do not depend on what the bundled manifest offers.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { dropUserModel } from './workstation-seed.ts';

const LABELS = ['tumor_detected', 'hemorrhage_detected', 'infarct_detected'] as const;

export const OP_MODEL_ID = 'op-test-model';

/** Thresholds per point: `everything` keeps every candidate above the floor, `nothing` none. */
export const OP_POINTS = { everything: 0.06, balanced: 0.5, nothing: 1 } as const;

export function installOperatingPointModel(dataDir: string): string {
  if (existsSync(join(dataDir, 'models', OP_MODEL_ID))) return OP_MODEL_ID;
  dropUserModel(dataDir, OP_MODEL_ID, (manifest) => {
    manifest['name'] = 'operating point test model';
    manifest['operating_points'] = Object.entries(OP_POINTS).map(([name, t]) => ({
      name,
      display_name: name,
      description: `every label at ${t}`,
      thresholds: Object.fromEntries(LABELS.map((l) => [l, t])),
      measured: { on: 'made up for a test', series: 10, lesions: 12, sensitivity: 0.5, false_positives_per_series: 0.5, per_label: {} },
    }));
    manifest['default_operating_point'] = 'balanced';
    // Monotone and far from the identity, so a test can tell calibrated confidences from raw ones.
    manifest['calibration'] = { method: 'platt', fitted_on: 'a test', per_label: Object.fromEntries(LABELS.map((l) => [l, { a: 0.5, b: 0.3 }])) };
    manifest['card'] = { limitations: ['Only for tests.'] };
    const at = { '0.25': 0.6, '0.5': 0.7, '1': 0.8, '2': 0.9 };
    (manifest['metrics'] as Record<string, unknown>)['heldout'] = {
      family: 'a made-up family',
      series: 10,
      lesions: 12,
      sensitivity_at: at,
      froc: [0.1, 0.3, 0.6, 1.2, 2.5].map((fp, i) => ({ threshold: 0.9 - i * 0.15, false_positives_per_series: fp, sensitivity: 0.55 + i * 0.1 })),
      reliability: Array.from({ length: 10 }, (_, k) => ({ low: k / 10, high: (k + 1) / 10, count: 10 + k, mean_confidence: k / 10 + 0.05, observed: k / 10 + 0.04 })),
      expected_calibration_error: 0.01,
      per_label: Object.fromEntries(LABELS.map((l) => [l, { lesions: 4, sensitivity_at: at }])),
      per_modality: { CT: { series: 5, lesions: 6, sensitivity_at: at }, MR: { series: 5, lesions: 6, sensitivity_at: at } },
    };
  });
  return OP_MODEL_ID;
}
