/**
 * Which findings hit which lesions. A finding hits a lesion of its own label when its key slice is
 * on the lesion (or next to one of its slices: the key slice of a finding and the truth's largest
 * cross-section can differ by one) and its box's centre lies inside the lesion's box there, or
 * the two boxes overlap by IoU >= 0.3. The rule counts a lesion as found the way a reader would:
 * the box points at it. (LUNA16's FROC counts a candidate inside the nodule's radius likewise.)
 *
 * Findings are taken most confident first. The first finding on a lesion is a true positive; a
 * later one on an already found lesion is a duplicate (neither a hit nor a false positive, as in
 * FROC practice); a finding on no lesion of its label is a false positive.
 */
import { iou } from '#server/analysis/nms.ts';
import type { Box, Candidate, ScoredSeries, TruthLesion } from './truth.ts';

export const HIT_IOU = 0.3;

export type Outcome = 'hit' | 'duplicate' | 'false_positive';

export type MatchedCandidate = Candidate & { outcome: Outcome; lesion: number | null };

export type MatchedSeries = {
  modality: string;
  lesions: { label: string; kind: string; bestScore: number | null }[];
  candidates: MatchedCandidate[];
};

function centreInside(a: Box, b: Box): boolean {
  const cx = a.x + a.width / 2;
  const cy = a.y + a.height / 2;
  return cx >= b.x && cx <= b.x + b.width && cy >= b.y && cy <= b.y + b.height;
}

export function hits(candidate: Candidate, lesion: TruthLesion): boolean {
  if (candidate.label !== lesion.label) return false;
  return lesion.slices.some((s) => Math.abs(s.slice_index - candidate.sliceIndex) <= 1 && (centreInside(candidate.box, s.box) || iou(candidate.box, s.box) >= HIT_IOU));
}

export function matchSeries(series: ScoredSeries): MatchedSeries {
  const lesions = series.truth.lesions.map((l) => ({ label: l.label, kind: l.kind, bestScore: null as number | null }));
  const ordered = [...series.candidates].sort((a, b) => b.score - a.score);
  const candidates = ordered.map((c): MatchedCandidate => {
    let duplicateOf: number | null = null;
    for (const [i, lesion] of series.truth.lesions.entries()) {
      if (!hits(c, lesion)) continue;
      const state = lesions[i] as (typeof lesions)[number];
      if (state.bestScore === null) {
        state.bestScore = c.score;
        return { ...c, outcome: 'hit', lesion: i };
      }
      duplicateOf ??= i;
    }
    return duplicateOf === null ? { ...c, outcome: 'false_positive', lesion: null } : { ...c, outcome: 'duplicate', lesion: duplicateOf };
  });
  return { modality: series.truth.modality, lesions, candidates };
}
