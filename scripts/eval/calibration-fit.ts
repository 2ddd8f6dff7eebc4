/**
 * Calibration of finding confidences: Platt scaling fitted per label (logistic regression of
 * "points at a real lesion of its label" on the logit of the raw score), the reliability diagram
 * and the expected calibration error (Guo et al., 2017: the count-weighted mean gap between
 * confidence and observed frequency over equal-width bins).
 */
import { logit, plattConfidence, sigmoid } from '#server/analysis/calibration.ts';
import type { PlattScaling } from '#server/analysis/manifest.ts';
import type { MatchedSeries } from './matching.ts';

/** A finding is right when it points at a lesion of its label, found first or not. */
export function samples(series: readonly MatchedSeries[], label?: string): { score: number; positive: boolean }[] {
  return series.flatMap((s) => s.candidates.filter((c) => label === undefined || c.label === label).map((c) => ({ score: c.score, positive: c.outcome !== 'false_positive' })));
}

/** Too few findings to fit two parameters honestly: the label keeps its raw scores. */
export const MIN_FIT_SAMPLES = 30;

/**
 * Newton's method on the log-likelihood with a small ridge on (a - 1) and b, which keeps the fit
 * finite when a label's findings are all right or all wrong. Platt's target smoothing
 * ((n+ + 1)/(n+ + 2)) guards against overconfident fits on small sets.
 */
export function fitPlatt(data: readonly { score: number; positive: boolean }[]): PlattScaling | null {
  if (data.length < MIN_FIT_SAMPLES) return null;
  const pos = data.filter((d) => d.positive).length;
  const neg = data.length - pos;
  const hi = (pos + 1) / (pos + 2);
  const lo = 1 / (neg + 2);
  const xs = data.map((d) => logit(d.score));
  const ys = data.map((d) => (d.positive ? hi : lo));
  const ridge = 1e-3;
  let a = 1;
  let b = 0;
  for (let iter = 0; iter < 100; iter += 1) {
    let ga = ridge * (a - 1);
    let gb = ridge * b;
    let haa = ridge;
    let hab = 0;
    let hbb = ridge;
    for (let i = 0; i < xs.length; i += 1) {
      const x = xs[i] as number;
      const p = sigmoid(a * x + b);
      const r = p - (ys[i] as number);
      const w = p * (1 - p);
      ga += r * x;
      gb += r;
      haa += w * x * x;
      hab += w * x;
      hbb += w;
    }
    const det = haa * hbb - hab * hab;
    if (!(Math.abs(det) > 1e-12)) break;
    const da = (hbb * ga - hab * gb) / det;
    const db = (haa * gb - hab * ga) / det;
    a -= da;
    b -= db;
    if (Math.abs(da) + Math.abs(db) < 1e-10) break;
  }
  // A fit that reverses the order of findings would be a bug in the model, not a calibration.
  if (!(a > 0) || !Number.isFinite(b)) return null;
  return { a: Math.round(a * 1e6) / 1e6, b: Math.round(b * 1e6) / 1e6 };
}

export function applyPlatt(p: PlattScaling | undefined, raw: number): number {
  return p ? plattConfidence(p, raw) : raw;
}

export type ReliabilityBin = { low: number; high: number; count: number; mean_confidence: number | null; observed: number | null };

export function reliability(data: readonly { score: number; positive: boolean }[], bins = 10): { bins: ReliabilityBin[]; ece: number } {
  const out: ReliabilityBin[] = [];
  let ece = 0;
  for (let k = 0; k < bins; k += 1) {
    const low = k / bins;
    const high = (k + 1) / bins;
    const inBin = data.filter((d) => d.score >= low && (k === bins - 1 ? d.score <= high : d.score < high));
    const count = inBin.length;
    const mean = count === 0 ? null : inBin.reduce((s, d) => s + d.score, 0) / count;
    const observed = count === 0 ? null : inBin.filter((d) => d.positive).length / count;
    if (mean !== null && observed !== null) ece += (count / Math.max(1, data.length)) * Math.abs(mean - observed);
    const r4 = (v: number | null): number | null => (v === null ? null : Math.round(v * 1e4) / 1e4);
    out.push({ low, high, count, mean_confidence: r4(mean), observed: r4(observed) });
  }
  return { bins: out, ece: Math.round(ece * 1e4) / 1e4 };
}
