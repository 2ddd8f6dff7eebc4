/**
 * A model's calibration (manifest `calibration`): raw scores -> calibrated confidences, and a
 * calibrated threshold back to the raw score the decoder compares its peaks with. Both directions
 * are exact inverses because Platt scaling is strictly increasing (a > 0).
 */
import type { Calibration, PlattScaling } from '#server/analysis/manifest.ts';

/** Scores this close to 0 or 1 are clamped before the logit, which is infinite there. */
const EDGE = 1e-6;

export const logit = (p: number): number => {
  const q = Math.min(1 - EDGE, Math.max(EDGE, p));
  return Math.log(q / (1 - q));
};
export const sigmoid = (v: number): number => 1 / (1 + Math.exp(-v));

export type Calibrator = {
  /** The calibrated confidence of a raw score for the label. */
  confidence(label: string, raw: number): number;
  /** The raw score whose calibrated confidence is `threshold`. */
  rawThreshold(label: string, threshold: number): number;
};

/** A label's calibrated confidence for a raw score: sigmoid(a * logit(raw) + b). */
export function plattConfidence(p: PlattScaling, raw: number): number {
  return sigmoid(p.a * logit(raw) + p.b);
}

const IDENTITY: Calibrator = { confidence: (_label, raw) => raw, rawThreshold: (_label, t) => t };

export function calibratorOf(calibration: Calibration | undefined): Calibrator {
  if (!calibration) return IDENTITY;
  return {
    confidence(label, raw) {
      const p = calibration.per_label[label];
      return p ? plattConfidence(p, raw) : raw;
    },
    rawThreshold(label, threshold) {
      const p = calibration.per_label[label];
      // 0 and 1 stay themselves: "everything" and "nothing" mean the same on either scale.
      if (!p || threshold <= 0 || threshold >= 1) return threshold;
      return sigmoid((logit(threshold) - p.b) / p.a);
    },
  };
}

/** Each label's calibrated threshold as the raw score the decoder compares its peaks with. */
export function rawThresholdsOf(calibrator: Calibrator, thresholds: Readonly<Record<string, number>>): Record<string, number> {
  return Object.fromEntries(Object.entries(thresholds).map(([label, t]) => [label, calibrator.rawThreshold(label, t)]));
}
