/**
 * Slice classifier outputs -> per-slice scores -> one image-level finding per label. Pure.
 *
 * A classifier says "this slice shows the label" without saying where, so a finding is the
 * label's best slice (series score = max over slices; key slice = argmax) and its location is
 * that whole image (localization 'image'): never drawn or exported as if it were a lesion box.
 */
import type { Finding } from '#server/analysis/aggregate.ts';
import type { ImageSize, Tensor } from '#server/analysis/decode.ts';
import type { ClassifierOutput } from '#server/analysis/manifest.ts';
import type { Detection } from '#server/analysis/nms.ts';

/** Per slice, each channel's score (background dropped), in channel order. */
export type SliceScores = Float32Array;

function columnsOf(spec: ClassifierOutput): number {
  return spec.channels.length + (spec.background_index === undefined ? 0 : 1);
}

export function decodeClassifier(outputs: Readonly<Record<string, Tensor>>, spec: ClassifierOutput, images: number): SliceScores[] {
  const t = outputs[spec.tensor];
  if (t === undefined) throw new RangeError(`model output ${spec.tensor} missing (have ${Object.keys(outputs).join(', ')})`);
  const columns = columnsOf(spec);
  if (t.dims.length !== 2 || t.dims[0] !== images || t.dims[1] !== columns || t.data.length !== images * columns) {
    const background = spec.background_index === undefined ? '' : ' + background';
    throw new RangeError(`output ${spec.tensor}: expected dims [${images}, ${columns}] (${spec.channels.length} channels${background}), got [${t.dims.join(', ')}]`);
  }
  const out: SliceScores[] = [];
  for (let b = 0; b < images; b++) {
    const row = Array.from(t.data.subarray(b * columns, (b + 1) * columns));
    let probs = row;
    if (spec.score_activation === 'softmax_logits') {
      const max = Math.max(...row);
      const exp = row.map((v) => Math.exp(v - max));
      const sum = exp.reduce((a, v) => a + v, 0);
      probs = exp.map((v) => v / sum);
    } else if (spec.score_activation === 'sigmoid_logits') {
      probs = row.map((v) => 1 / (1 + Math.exp(-v)));
    }
    const scores = new Float32Array(spec.channels.length);
    let c = 0;
    probs.forEach((p, i) => {
      if (i === spec.background_index) return;
      // A NaN score (a broken export) counts as nothing found, never as certain.
      scores[c++] = Number.isFinite(p) ? Math.min(1, Math.max(0, p)) : 0;
    });
    out.push(scores);
  }
  return out;
}

/**
 * Scores -> per-slice detections: each label at or above its threshold, its box the whole image.
 */
export function classifierDetections(scores: readonly SliceScores[], sizes: readonly ImageSize[], channels: readonly string[], thresholds: readonly number[]): Detection[][] {
  return scores.map((row, k) => {
    const size = sizes[k] as ImageSize;
    const found: Detection[] = [];
    channels.forEach((label, c) => {
      const s = row[c] as number;
      if (s >= (thresholds[c] as number)) found.push({ label, confidence: s, box: { x: 0, y: 0, width: size.columns, height: size.rows } });
    });
    return found.sort((a, b) => b.confidence - a.confidence);
  });
}

/**
 * One finding per label found on some slice: confidence the best slice's score (the series
 * score), slice_index that slice (the key image) and its whole-image box; first/last slice and
 * slice_count span the slices where the label reached its threshold.
 */
export function aggregateImageLevel(perSlice: readonly (readonly Detection[])[]): Finding[] {
  const byLabel = new Map<string, Finding>();
  perSlice.forEach((detections, k) => {
    for (const d of detections) {
      const f = byLabel.get(d.label);
      if (f === undefined) {
        byLabel.set(d.label, { label: d.label, confidence: d.confidence, slice_index: k, box: d.box, first_slice: k, last_slice: k, slice_count: 1, detection: d });
        continue;
      }
      f.last_slice = k;
      f.slice_count += 1;
      if (d.confidence > f.confidence) {
        f.confidence = d.confidence;
        f.slice_index = k;
        f.box = d.box;
        f.detection = d;
      }
    }
  });
  return [...byLabel.values()].sort((a, b) => b.confidence - a.confidence);
}
