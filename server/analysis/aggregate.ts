/**
 * Per-slice boxes -> findings: one finding per lesion, linking boxes of the same label on
 * adjacent slices. Mirrors aggregate() in models/mia-phantom-detector/train.py, which is the
 * definition its published sensitivity and false-positive figures were measured with.
 */
import type { FindingLocalization } from '#common/vocabulary.ts';
import { aggregateImageLevel } from '#server/analysis/classifier-decode.ts';
import type { OutputSpec } from '#server/analysis/manifest.ts';
import { iou, type Box, type Detection } from '#server/analysis/nms.ts';

export type AggregationSpec = {
  /** Minimum IoU between a box and the finding's box on its latest slice to join it. */
  link_iou: number;
  /** Slices a lesion may skip (a missed slice) and still be one finding. */
  max_slice_gap: number;
  /**
   * A finding's score: its most confident slice's (`max`, the default), or the mean of its two
   * most confident slices, a finding seen on one slice alone scoring half (`top2_mean`).
   */
  score?: 'max' | 'top2_mean' | undefined;
  /** With `top2_mean`: slices are collected down to this raw score, below any label's threshold. */
  support_threshold?: number | undefined;
};

export type Finding<T extends Detection = Detection> = {
  label: string;
  /** The aggregation's score over the finding's slices (AggregationSpec.score). */
  confidence: number;
  /** The most confident slice (index into the scan's slice order) and its box. */
  slice_index: number;
  box: Box;
  first_slice: number;
  last_slice: number;
  slice_count: number;
  /** The key slice's detection itself: a segmentation region carries its mask there. */
  detection: T;
};

/** `second`: the track's second highest slice confidence (0 with one slice). */
type Track<T extends Detection> = Finding<T> & { last_box: Box; second: number };

export function aggregateFindings<T extends Detection>(perSlice: readonly (readonly T[])[], spec: AggregationSpec): Finding<T>[] {
  const tracks: Track<T>[] = [];
  /** Indices of the tracks that may still be joined, in the order they began. */
  let joinable: number[] = [];
  perSlice.forEach((detections, k) => {
    // Only tracks that reached one of the last max_slice_gap + 1 slices can be joined: decoded
    // down to a support threshold, a 300-slice series makes thousands of tracks.
    joinable = joinable.filter((ti) => k - (tracks[ti] as Track<T>).last_slice <= spec.max_slice_gap + 1);
    const candidates = joinable.length;
    const ordered = [...detections].sort((a, b) => b.confidence - a.confidence);
    for (const d of ordered) {
      let best = -1;
      let bestIou = -1;
      for (let i = 0; i < candidates; i += 1) {
        const ti = joinable[i] as number;
        const t = tracks[ti] as Track<T>;
        // A track this slice already extended is no candidate (one box per track and slice).
        if (t.label !== d.label || t.last_slice === k) continue;
        const o = iou(t.last_box, d.box);
        if (o >= spec.link_iou && o > bestIou) {
          best = ti;
          bestIou = o;
        }
      }
      if (best < 0) {
        tracks.push({
          label: d.label,
          confidence: d.confidence,
          slice_index: k,
          box: d.box,
          first_slice: k,
          last_slice: k,
          slice_count: 1,
          detection: d,
          last_box: d.box,
          second: 0,
        });
        joinable.push(tracks.length - 1);
      } else {
        const t = tracks[best] as Track<T>;
        t.last_slice = k;
        t.last_box = d.box;
        t.slice_count += 1;
        if (d.confidence > t.confidence) {
          t.second = t.confidence;
          t.confidence = d.confidence;
          t.slice_index = k;
          t.box = d.box;
          t.detection = d;
        } else if (d.confidence > t.second) {
          t.second = d.confidence;
        }
      }
    }
  });
  const top2 = spec.score === 'top2_mean';
  return tracks
    .map(({ last_box: _lastBox, second, ...finding }) => (top2 ? { ...finding, confidence: (finding.confidence + second) / 2 } : finding))
    .sort((a, b) => b.confidence - a.confidence);
}

/**
 * The per-label thresholds to decode slices at, for findings to be kept at `thresholds`: a score
 * over several slices needs the slices below the threshold too (a lesion at 0.8 on one slice and
 * 0.3 on the next scores 0.55), down to the aggregation's support threshold.
 */
export function decodeThresholdsFor(output: OutputSpec, thresholds: Readonly<Record<string, number>>): Record<string, number> {
  if (output.decoding === 'classifier' || output.decoding === 'segmentation' || output.aggregation.score !== 'top2_mean') return { ...thresholds };
  const support = output.aggregation.support_threshold ?? 0;
  return Object.fromEntries(Object.entries(thresholds).map(([label, t]) => [label, Math.min(t, support)]));
}

export function localizationOf(output: OutputSpec): FindingLocalization {
  if (output.decoding === 'classifier') return 'image';
  return output.decoding === 'segmentation' ? 'region' : 'box';
}

/**
 * A scan's per-slice detections -> its findings, the way the manifest's decoding defines; with
 * `thresholds` (the labels' raw ones), only findings that score at least their label's (slices
 * decoded at decodeThresholdsFor's lower ones join findings but do not make them).
 */
export function aggregateForOutput(perSlice: readonly (readonly Detection[])[], output: OutputSpec, thresholds?: Readonly<Record<string, number>>): Finding[] {
  const findings = output.decoding === 'classifier' ? aggregateImageLevel(perSlice) : aggregateFindings(perSlice, output.aggregation);
  return thresholds ? findings.filter((f) => f.confidence >= (thresholds[f.label] ?? 0)) : findings;
}
