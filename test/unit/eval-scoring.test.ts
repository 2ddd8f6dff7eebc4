import { describe, expect, it } from 'vitest';
import { applyPlatt, fitPlatt, reliability, samples } from '../../scripts/eval/calibration-fit.ts';
import { chooseThresholds, figuresAt, frocCurve, sensitivityAt } from '../../scripts/eval/froc.ts';
import { matchSeries, type MatchedSeries } from '../../scripts/eval/matching.ts';
import type { Candidate, ScoredSeries, TruthLesion } from '../../scripts/eval/truth.ts';

function lesion(label: string, slices: Array<[number, number, number, number, number]>): TruthLesion {
  const parts = slices.map(([slice_index, x, y, width, height]) => ({ slice_index, instance_uid: `uid-${slice_index}`, box: { x, y, width, height } }));
  const key = parts.reduce((a, b) => (b.box.width * b.box.height > a.box.width * a.box.height ? b : a));
  return { label, kind: label.replace('_detected', ''), slice_index: key.slice_index, box: key.box, slices: parts };
}

function series(lesions: TruthLesion[], candidates: Candidate[], modality = 'CT'): ScoredSeries {
  return {
    truth: { seed: 1, modality, scan_uid: '2.25.1', slices: 20, instance_uids: Array.from({ length: 20 }, (_, i) => `uid-${i}`), lesions },
    candidates,
  };
}

const find = (label: string, score: number, sliceIndex: number, x: number, y: number, width = 20, height = 20): Candidate => ({ label, score, sliceIndex, box: { x, y, width, height } });

describe('matching findings to lesions', () => {
  const mass = lesion('tumor_detected', [[5, 100, 100, 30, 30], [6, 98, 98, 34, 34]]);

  it('counts the first finding on a lesion as a hit, a second as a duplicate and a finding elsewhere as a false positive', () => {
    const m = matchSeries(series([mass], [find('tumor_detected', 0.6, 6, 105, 105), find('tumor_detected', 0.9, 5, 100, 100, 30, 30), find('tumor_detected', 0.7, 6, 10, 10)]));
    expect(m.candidates.map((c) => [c.score, c.outcome])).toEqual([[0.9, 'hit'], [0.7, 'false_positive'], [0.6, 'duplicate']]);
    expect(m.lesions[0]?.bestScore).toBe(0.9);
  });

  it('needs the label, a slice on or next to the lesion and the box pointing at it', () => {
    const m = matchSeries(series([mass], [
      find('hemorrhage_detected', 0.9, 5, 100, 100, 30, 30),
      find('tumor_detected', 0.8, 9, 100, 100, 30, 30),
      find('tumor_detected', 0.7, 4, 105, 105),
    ]));
    expect(m.candidates.map((c) => c.outcome)).toEqual(['false_positive', 'false_positive', 'hit']);
  });
});

function matched(pairs: Array<[string, boolean, number]>, extraSeries = 0): MatchedSeries[] {
  // Each pair: a lesion found (true) at a score, or a false positive (false) at a score.
  const one: MatchedSeries = { modality: 'CT', lesions: [], candidates: [] };
  for (const [label, hit, score] of pairs) {
    if (hit) {
      one.lesions.push({ label, kind: label, bestScore: score });
      one.candidates.push({ label, score, sliceIndex: 0, box: { x: 0, y: 0, width: 1, height: 1 }, outcome: 'hit', lesion: one.lesions.length - 1 });
    } else {
      one.candidates.push({ label, score, sliceIndex: 0, box: { x: 0, y: 0, width: 1, height: 1 }, outcome: 'false_positive', lesion: null });
    }
  }
  return [one, ...Array.from({ length: extraSeries }, () => ({ modality: 'CT', lesions: [], candidates: [] }))];
}

describe('FROC', () => {
  it('steps sensitivity and false positives per series down the scores', () => {
    const data = matched([['a', true, 0.9], ['a', false, 0.8], ['a', true, 0.7], ['a', false, 0.6]], 1);
    data[0]?.lesions.push({ label: 'a', kind: 'a', bestScore: null });
    const curve = frocCurve(data);
    expect(curve).toEqual([
      { threshold: 0.9, false_positives_per_series: 0, sensitivity: 1 / 3 },
      { threshold: 0.8, false_positives_per_series: 0.5, sensitivity: 1 / 3 },
      { threshold: 0.7, false_positives_per_series: 0.5, sensitivity: 2 / 3 },
      { threshold: 0.6, false_positives_per_series: 1, sensitivity: 2 / 3 },
    ]);
    expect(sensitivityAt(curve, 0.25)).toBeCloseTo(1 / 3);
    expect(sensitivityAt(curve, 0.5)).toBeCloseTo(2 / 3);
  });

  it('spends a false-positive budget on the label where it finds the most lesions', () => {
    // Label a: one false positive opens onto three hits; label b: one false positive, one hit.
    const data = matched([
      ['a', false, 0.95], ['a', true, 0.9], ['a', true, 0.85], ['a', true, 0.8], ['a', false, 0.3],
      ['b', true, 0.9], ['b', false, 0.6], ['b', true, 0.5], ['b', false, 0.2],
    ], 1);
    const t = chooseThresholds(data, ['a', 'b'], 0.5); // two series: one false positive in all
    const f = figuresAt(data, ['a', 'b'], t);
    expect(f.per_label['a']?.found).toBe(3);
    expect(f.per_label['b']?.found).toBe(1);
    expect(f.false_positives_per_series).toBe(0.5);
    // Thresholds sit between the last event taken and the next.
    expect(t['a']).toBeCloseTo((0.8 + 0.3) / 2, 4);
    expect(t['b']).toBeCloseTo((0.9 + 0.6) / 2, 4);
    const wide = figuresAt(data, ['a', 'b'], chooseThresholds(data, ['a', 'b'], 1));
    expect(wide.per_label['b']?.found).toBe(2);
    expect(wide.false_positives_per_series).toBe(1);
  });
});

describe('calibration fit', () => {
  // Findings whose chance of being right is exactly sigmoid(2 * logit(raw) - 1).
  function drawn(n: number): { score: number; positive: boolean }[] {
    let state = 12345;
    const rand = (): number => {
      state = (state * 1103515245 + 12345) % 2 ** 31;
      return state / 2 ** 31;
    };
    return Array.from({ length: n }, () => {
      const raw = 0.02 + 0.96 * rand();
      const p = 1 / (1 + Math.exp(-(2 * Math.log(raw / (1 - raw)) - 1)));
      return { score: raw, positive: rand() < p };
    });
  }

  it('recovers a known Platt scaling and brings the calibration error down', () => {
    const data = drawn(20000);
    const fit = fitPlatt(data);
    expect(fit?.a).toBeCloseTo(2, 1);
    expect(fit?.b).toBeCloseTo(-1, 1);
    const before = reliability(data).ece;
    const after = reliability(data.map((d) => ({ ...d, score: applyPlatt(fit ?? undefined, d.score) }))).ece;
    expect(before).toBeGreaterThan(0.08);
    expect(after).toBeLessThan(0.02);
  });

  it('does not fit a label with too few findings', () => {
    expect(fitPlatt(drawn(10))).toBeNull();
  });

  it('bins the reliability diagram and weighs the error by bin counts', () => {
    const r = reliability([{ score: 0.05, positive: false }, { score: 0.15, positive: false }, { score: 0.95, positive: true }, { score: 0.95, positive: false }]);
    expect(r.bins).toHaveLength(10);
    expect(r.bins[0]).toMatchObject({ count: 1, observed: 0 });
    expect(r.bins[9]).toMatchObject({ count: 2, mean_confidence: 0.95, observed: 0.5 });
    // (1 * 0.05 + 1 * 0.15 + 2 * 0.45) / 4
    expect(r.ece).toBeCloseTo(0.275, 4);
  });

  it('counts a duplicate on a real lesion as right and a false positive as wrong', () => {
    const data = matched([['a', true, 0.9], ['a', false, 0.4]]);
    data[0]?.candidates.push({ label: 'a', score: 0.5, sliceIndex: 0, box: { x: 0, y: 0, width: 1, height: 1 }, outcome: 'duplicate', lesion: 0 });
    expect(samples(data).map((s) => s.positive)).toEqual([true, false, true]);
  });
});
