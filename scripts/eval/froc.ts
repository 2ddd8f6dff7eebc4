/**
 * Lesion-level FROC figures (Chakraborty's free-response ROC): sensitivity (lesions found / all
 * lesions) against false positives per series, as the threshold falls. Scores here are whatever
 * scale the caller matched on (raw or calibrated).
 */
import type { MatchedSeries } from './matching.ts';

export type FrocPoint = { threshold: number; false_positives_per_series: number; sensitivity: number };

/** The rates the issue asks for. */
export const FP_RATES = [0.25, 0.5, 1, 2] as const;

type Scope = { label?: string | undefined };

function events(series: readonly MatchedSeries[], scope: Scope): { lesions: number; found: number[]; falsePositives: number[] } {
  const found: number[] = [];
  const falsePositives: number[] = [];
  let lesions = 0;
  for (const s of series) {
    for (const l of s.lesions) {
      if (scope.label !== undefined && l.label !== scope.label) continue;
      lesions += 1;
      if (l.bestScore !== null) found.push(l.bestScore);
    }
    for (const c of s.candidates) {
      if (c.outcome !== 'false_positive' || (scope.label !== undefined && c.label !== scope.label)) continue;
      falsePositives.push(c.score);
    }
  }
  return { lesions, found, falsePositives };
}

/** One point per distinct score, highest threshold first. */
export function frocCurve(series: readonly MatchedSeries[], scope: Scope = {}): FrocPoint[] {
  const { lesions, found, falsePositives } = events(series, scope);
  const all = [...found.map((s) => ({ s, hit: true })), ...falsePositives.map((s) => ({ s, hit: false }))].sort((a, b) => b.s - a.s);
  const n = Math.max(1, series.length);
  const points: FrocPoint[] = [];
  let tp = 0;
  let fp = 0;
  for (let i = 0; i < all.length; i += 1) {
    const e = all[i] as { s: number; hit: boolean };
    if (e.hit) tp += 1;
    else fp += 1;
    // Equal scores fall together: one point after the last of them.
    if (i + 1 < all.length && (all[i + 1] as { s: number }).s === e.s) continue;
    points.push({ threshold: e.s, false_positives_per_series: fp / n, sensitivity: lesions === 0 ? 0 : tp / lesions });
  }
  return points;
}

/** The best sensitivity reached without more than `rate` false positives per series. */
export function sensitivityAt(curve: readonly FrocPoint[], rate: number): number | null {
  if (curve.length === 0) return null;
  let best = 0;
  for (const p of curve) if (p.false_positives_per_series <= rate + 1e-12) best = Math.max(best, p.sensitivity);
  return best;
}

export function sensitivityTable(curve: readonly FrocPoint[]): Record<string, number | null> {
  return Object.fromEntries(FP_RATES.map((r) => [String(r), sensitivityAt(curve, r)]));
}

/** A curve thinned to at most `max` points for the manifest (the plot needs its shape, not every step). */
export function thinCurve(curve: readonly FrocPoint[], max: number): FrocPoint[] {
  if (curve.length <= max) return [...curve];
  const out: FrocPoint[] = [];
  const step = (curve.length - 1) / (max - 1);
  for (let i = 0; i < max; i += 1) out.push(curve[Math.round(i * step)] as FrocPoint);
  return out;
}

export type LabelFigures = { lesions: number; found: number; sensitivity: number | null; false_positives: number; false_positives_per_series: number };

export type PointFigures = {
  series: number;
  lesions: number;
  sensitivity: number | null;
  false_positives_per_series: number;
  per_label: Record<string, LabelFigures>;
};

/** What a set of per-label thresholds gives: found lesions and false positives per label. */
export function figuresAt(series: readonly MatchedSeries[], labels: readonly string[], thresholds: Readonly<Record<string, number>>): PointFigures {
  const n = Math.max(1, series.length);
  const per: Record<string, LabelFigures> = {};
  let lesions = 0;
  let found = 0;
  let fps = 0;
  for (const label of labels) {
    const t = thresholds[label] ?? 1;
    const e = events(series, { label });
    const f = e.found.filter((s) => s >= t).length;
    const fp = e.falsePositives.filter((s) => s >= t).length;
    per[label] = { lesions: e.lesions, found: f, sensitivity: e.lesions === 0 ? null : f / e.lesions, false_positives: fp, false_positives_per_series: fp / n };
    lesions += e.lesions;
    found += f;
    fps += fp;
  }
  return { series: series.length, lesions, sensitivity: lesions === 0 ? null : found / lesions, false_positives_per_series: fps / n, per_label: per };
}

/**
 * Per-label thresholds that find the most lesions for a budget of false positives per series
 * (all labels together). Each label's events, most confident first, fall into blocks of one false
 * positive and the hits before the next; blocks are taken greedily by hits per false positive,
 * looking ahead over a label's next blocks so a block without hits that opens onto many is not
 * passed over. The threshold sits halfway between the last event taken and the next one, so it
 * does not sit on a score the data happened to have.
 */
export function chooseThresholds(series: readonly MatchedSeries[], labels: readonly string[], fpPerSeries: number): Record<string, number> {
  const budget = Math.floor(fpPerSeries * series.length + 1e-9);
  type Ev = { s: number; hit: boolean };
  const lists = new Map<string, Ev[]>();
  for (const label of labels) {
    const e = events(series, { label });
    lists.set(label, [...e.found.map((s) => ({ s, hit: true })), ...e.falsePositives.map((s) => ({ s, hit: false }))].sort((a, b) => b.s - a.s));
  }
  // taken[label] = how many of its events are above its threshold.
  const taken = new Map<string, number>(labels.map((l) => [l, 0]));
  const freeHits = (label: string): void => {
    const list = lists.get(label) as Ev[];
    let i = taken.get(label) as number;
    while (i < list.length && (list[i] as Ev).hit) i += 1;
    taken.set(label, i);
  };
  labels.forEach(freeHits);
  let spent = 0;
  for (;;) {
    let best: { label: string; upTo: number; cost: number; ratio: number } | null = null;
    for (const label of labels) {
      const list = lists.get(label) as Ev[];
      let i = taken.get(label) as number;
      let hitsSoFar = 0;
      let cost = 0;
      while (i < list.length && spent + cost < budget) {
        // One block: the false positive at i, then the hits up to the next false positive.
        cost += 1;
        i += 1;
        while (i < list.length && (list[i] as Ev).hit) {
          hitsSoFar += 1;
          i += 1;
        }
        const ratio = hitsSoFar / cost;
        if (hitsSoFar > 0 && (!best || ratio > best.ratio)) best = { label, upTo: i, cost, ratio };
      }
    }
    if (!best) break;
    taken.set(best.label, best.upTo);
    spent += best.cost;
  }
  const out: Record<string, number> = {};
  for (const label of labels) {
    const list = lists.get(label) as Ev[];
    const i = taken.get(label) as number;
    const last = i > 0 ? (list[i - 1] as Ev).s : null;
    const next = i < list.length ? (list[i] as Ev).s : 0;
    // Nothing taken: just above the most confident event (or 1 when the label had none).
    const t = last === null ? Math.min(1, (list[0]?.s ?? 1) + 1e-4) : (last + next) / 2;
    out[label] = Math.round(t * 1e4) / 1e4;
  }
  return out;
}
