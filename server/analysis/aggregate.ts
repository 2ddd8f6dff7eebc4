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
};

export type Finding<T extends Detection = Detection> = {
  label: string;
  /** Max over the finding's slices. */
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

type Track<T extends Detection> = Finding<T> & { last_box: Box };

export function aggregateFindings<T extends Detection>(perSlice: readonly (readonly T[])[], spec: AggregationSpec): Finding<T>[] {
  const tracks: Track<T>[] = [];
  perSlice.forEach((detections, k) => {
    const claimed = new Set<number>();
    const ordered = [...detections].sort((a, b) => b.confidence - a.confidence);
    for (const d of ordered) {
      let best = -1;
      let bestIou = -1;
      tracks.forEach((t, ti) => {
        const gap = k - t.last_slice;
        if (claimed.has(ti) || t.label !== d.label || gap < 1 || gap > spec.max_slice_gap + 1) return;
        const o = iou(t.last_box, d.box);
        if (o >= spec.link_iou && o > bestIou) {
          best = ti;
          bestIou = o;
        }
      });
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
        });
        claimed.add(tracks.length - 1);
      } else {
        const t = tracks[best] as Track<T>;
        claimed.add(best);
        t.last_slice = k;
        t.last_box = d.box;
        t.slice_count += 1;
        if (d.confidence > t.confidence) {
          t.confidence = d.confidence;
          t.slice_index = k;
          t.box = d.box;
          t.detection = d;
        }
      }
    }
  });
  return tracks
    .map(({ last_box: _lastBox, ...finding }) => finding)
    .sort((a, b) => b.confidence - a.confidence);
}

export function localizationOf(output: OutputSpec): FindingLocalization {
  if (output.decoding === 'classifier') return 'image';
  return output.decoding === 'segmentation' ? 'region' : 'box';
}

/** A scan's per-slice detections -> its findings, the way the manifest's decoding defines. */
export function aggregateForOutput(perSlice: readonly (readonly Detection[])[], output: OutputSpec): Finding[] {
  return output.decoding === 'classifier' ? aggregateImageLevel(perSlice) : aggregateFindings(perSlice, output.aggregation);
}
