/**
 * YOLO-style outputs -> per-slice boxes in the ORIGINAL image's pixels. Pure, like decode.ts.
 *
 * One tensor holds K candidates per image, each [box(4), objectness?, class scores(C)], with the
 * candidate axis last ([N, K, 4+C(+1)], YOLOv5 exports) or first ([N, 4+C(+1), K], YOLOv8
 * exports). A candidate's label is its best class; its score is that class's score, times the
 * objectness when the model has one (YOLOv5: P(object) * P(class | object)).
 */
import type { ImageSize, Tensor } from '#server/analysis/decode.ts';
import type { YoloOutput } from '#server/analysis/manifest.ts';
import { nmsPerLabel, type Detection } from '#server/analysis/nms.ts';

export type YoloManifest = { output: YoloOutput; input: { size: { height: number; width: number } } };

/** Candidates kept for NMS per image, best first. */
const PRE_NMS_CANDIDATES = 300;

const sigmoid = (v: number): number => 1 / (1 + Math.exp(-v));

/** Values per candidate, and the candidate count the tensor must have, or why it cannot be read. */
export function yoloGeometry(spec: YoloOutput, t: Tensor, images: number): { values: number; candidates: number } {
  const values = 4 + (spec.objectness ? 1 : 0) + spec.channels.length;
  const dims = t.dims;
  const where = `output ${spec.tensor}`;
  if (dims.length !== 3 || dims[0] !== images) {
    throw new RangeError(`${where}: expected dims [${images}, ${spec.layout === 'boxes_last' ? `K, ${values}` : `${values}, K`}], got [${dims.join(', ')}]`);
  }
  const valueAxis = spec.layout === 'boxes_last' ? 2 : 1;
  if (dims[valueAxis] !== values) {
    throw new RangeError(
      `${where}: output.layout ${spec.layout} expects ${values} values per box on axis ${valueAxis} (4 box${spec.objectness ? ' + objectness' : ''} + ${spec.channels.length} channels), got [${dims.join(', ')}]`,
    );
  }
  const candidates = dims[spec.layout === 'boxes_last' ? 1 : 2] as number;
  if (t.data.length !== images * values * candidates) throw new RangeError(`${where}: expected ${images * values * candidates} values, got ${t.data.length}`);
  return { values, candidates };
}

export function decodeYolo(
  outputs: Readonly<Record<string, Tensor>>,
  manifest: YoloManifest,
  images: readonly ImageSize[],
  thresholds: readonly number[],
): Detection[][] {
  const spec = manifest.output;
  const t = outputs[spec.tensor];
  if (t === undefined) throw new RangeError(`model output ${spec.tensor} missing (have ${Object.keys(outputs).join(', ')})`);
  const { values, candidates } = yoloGeometry(spec, t, images.length);
  const boxesLast = spec.layout === 'boxes_last';
  const activate = spec.score_activation === 'logits' ? sigmoid : (v: number): number => v;
  const classBase = spec.objectness ? 5 : 4;
  const minThreshold = Math.min(...thresholds);
  const { height, width } = manifest.input.size;

  return images.map((image, b) => {
    const base = b * values * candidates;
    const at = boxesLast ? (k: number, v: number): number => t.data[base + k * values + v] as number : (k: number, v: number): number => t.data[base + v * candidates + k] as number;
    // Normalized boxes are fractions of the model input, which spans the whole image (no
    // letterbox: input.resampling.keep_aspect is false), so they scale straight to the image.
    const sx = spec.box_units === 'normalized' ? image.columns : image.columns / width;
    const sy = spec.box_units === 'normalized' ? image.rows : image.rows / height;
    const found: Detection[] = [];
    for (let k = 0; k < candidates; k++) {
      const objectness = spec.objectness ? activate(at(k, 4)) : 1;
      if (!(objectness >= minThreshold)) continue;
      let best = -1;
      let bestScore = -Infinity;
      for (let c = 0; c < spec.channels.length; c++) {
        const s = activate(at(k, classBase + c));
        if (s > bestScore) {
          bestScore = s;
          best = c;
        }
      }
      const score = objectness * bestScore;
      // NaN from a broken export fails every comparison and is dropped here.
      if (best < 0 || !(score >= (thresholds[best] as number))) continue;
      const [a, bb, c2, d] = [at(k, 0), at(k, 1), at(k, 2), at(k, 3)];
      const [x0, y0, x1, y1] = spec.box_format === 'xyxy' ? [a, bb, c2, d] : [a - c2 / 2, bb - d / 2, a + c2 / 2, bb + d / 2];
      if (![x0, y0, x1, y1].every(Number.isFinite) || x1 <= x0 || y1 <= y0) continue;
      found.push({
        label: spec.channels[best] as string,
        confidence: score,
        box: { x: x0 * sx, y: y0 * sy, width: (x1 - x0) * sx, height: (y1 - y0) * sy },
      });
    }
    // NMS is quadratic in what it is given: a YOLOv8 export has 8,400 candidates, and a low
    // threshold (an evaluation sweep) can pass most of them. The best few hundred are plenty for
    // max_detections boxes.
    const cap = Math.max(PRE_NMS_CANDIDATES, spec.max_detections);
    if (found.length > cap) {
      found.sort((a, b) => b.confidence - a.confidence);
      found.length = cap;
    }
    if (!spec.class_agnostic_nms) return nmsPerLabel(found, spec.nms_iou, spec.max_detections);
    // One label per object: NMS across labels is NMS of one pseudo-label, labels kept.
    const kept = nmsPerLabel(found.map((d) => ({ ...d, label: '', original: d.label })), spec.nms_iou, spec.max_detections);
    return kept.map(({ original, confidence, box }) => ({ label: original, confidence, box }));
  });
}
