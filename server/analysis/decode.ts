/**
 * Raw model outputs -> per-slice boxes in the ORIGINAL image's pixels. Pure: no onnxruntime
 * here, the caller hands over the output tensors' data and dims, so this is unit-testable on
 * hand-made arrays and usable with any runtime.
 *
 * CenterNet decoding (Zhou et al., "Objects as Points", 2019): a heatmap channel per label at
 * 1/stride resolution; a peak (a cell not lower than its neighbours) above the label's threshold
 * is an object centre; the size map gives its width and height and the offset map the sub-cell
 * position of the centre.
 */
import { classifierDetections, decodeClassifier } from '#server/analysis/classifier-decode.ts';
import type { Manifest } from '#server/analysis/manifest.ts';
import { nmsPerLabel, type Detection } from '#server/analysis/nms.ts';
import { decodeYolo } from '#server/analysis/yolo-decode.ts';

export type Tensor = { data: Float32Array; dims: readonly number[] };

/** The size of each original image in the batch, in batch order. */
export type ImageSize = { rows: number; columns: number };

export type DecodeOptions = {
  /** Overrides the manifest's per-label thresholds (evaluation sweeps use a low one). */
  thresholds?: Readonly<Record<string, number>>;
};

function expectDims(name: string, t: Tensor, want: readonly number[]): void {
  const ok = t.dims.length === want.length && t.dims.every((d, i) => d === want[i]);
  if (!ok) throw new RangeError(`output ${name}: expected dims [${want.join(', ')}], got [${t.dims.join(', ')}]`);
  const n = want.reduce((a, b) => a * b, 1);
  if (t.data.length !== n) throw new RangeError(`output ${name}: expected ${n} values, got ${t.data.length}`);
}

function tensorNamed(outputs: Readonly<Record<string, Tensor>>, name: string): Tensor {
  const t = outputs[name];
  if (t === undefined) throw new RangeError(`model output ${name} missing (have ${Object.keys(outputs).join(', ')})`);
  return t;
}

const sigmoid = (v: number): number => 1 / (1 + Math.exp(-v));

type DecodeManifest = Pick<Manifest, 'input' | 'output' | 'labels'>;

/** Each output channel's threshold: the override if given, else its label's. */
function channelThresholds(manifest: DecodeManifest, options: DecodeOptions): number[] {
  return manifest.output.channels.map((label) => {
    const override = options.thresholds?.[label];
    if (override !== undefined) return override;
    const entry = manifest.labels.find((l) => l.label === label);
    if (entry === undefined) throw new RangeError(`no label entry for output channel ${label}`);
    return entry.threshold;
  });
}

/**
 * Decodes a batch with the manifest's decoding. Returns one list of detections per image, sorted
 * by confidence, after per-label thresholds, NMS and the manifest's max detections per image.
 * A classifier's detections are whole images (see classifier-decode.ts).
 */
export function decodeOutputs(
  outputs: Readonly<Record<string, Tensor>>,
  manifest: DecodeManifest,
  images: readonly ImageSize[],
  options: DecodeOptions = {},
): Detection[][] {
  const thresholds = channelThresholds(manifest, options);
  const spec = manifest.output;
  switch (spec.decoding) {
    case 'centernet':
      return decodeCenternet(outputs, { input: manifest.input, output: spec }, images, thresholds);
    case 'yolo':
      return decodeYolo(outputs, { input: manifest.input, output: spec }, images, thresholds);
    case 'classifier':
      return classifierDetections(decodeClassifier(outputs, spec, images.length), images, spec.channels, thresholds);
    case 'segmentation':
      // Regions carry masks and a plane buffer reused across batches: segmentation.ts decodes them.
      throw new RangeError('segmentation outputs are decoded by decodeSegmentation, not decodeOutputs');
  }
}

type CenternetOutput = Extract<Manifest['output'], { decoding: 'centernet' }>;

function decodeCenternet(
  outputs: Readonly<Record<string, Tensor>>,
  manifest: { input: Manifest['input']; output: CenternetOutput },
  images: readonly ImageSize[],
  thresholds: readonly number[],
): Detection[][] {
  const spec = manifest.output;
  if (spec.decoding !== 'centernet') throw new RangeError(`decodeOutputs decodes centernet outputs, not ${spec.decoding}`);
  const heat = tensorNamed(outputs, spec.tensors.heatmap);
  const size = tensorNamed(outputs, spec.tensors.size);
  const offset = tensorNamed(outputs, spec.tensors.offset);
  const n = images.length;
  const channels = spec.channels.length;
  const h = heat.dims[2] ?? 0;
  const w = heat.dims[3] ?? 0;
  expectDims(spec.tensors.heatmap, heat, [n, channels, h, w]);
  expectDims(spec.tensors.size, size, [n, 2, h, w]);
  expectDims(spec.tensors.offset, offset, [n, 2, h, w]);

  const stride = spec.stride;
  const sizeScale = spec.size_units === 'cells' ? stride : 1;
  const logits = spec.heatmap_activation === 'logits';
  const radius = (spec.peak_kernel - 1) / 2;
  const plane = h * w;

  return images.map((image, b) => {
    // Preprocessing resized the whole frame to the input size without keeping the aspect
    // ratio (manifest input.resampling), and with half-pixel centres edges scale linearly.
    const sx = image.columns / manifest.input.size.width;
    const sy = image.rows / manifest.input.size.height;
    const candidates: Detection[] = [];
    for (let c = 0; c < channels; c++) {
      const base = (b * channels + c) * plane;
      const value = (i: number): number => {
        const v = heat.data[base + i] as number;
        return logits ? sigmoid(v) : v;
      };
      const threshold = thresholds[c] as number;
      const label = spec.channels[c] as string;
      for (let y = 0; y < h; y++) {
        for (let x = 0; x < w; x++) {
          const score = value(y * w + x);
          if (score < threshold) continue;
          let isPeak = true;
          for (let dy = -radius; dy <= radius && isPeak; dy++) {
            for (let dx = -radius; dx <= radius; dx++) {
              const yy = y + dy;
              const xx = x + dx;
              if ((dy === 0 && dx === 0) || yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
              if (value(yy * w + xx) > score) {
                isPeak = false;
                break;
              }
            }
          }
          if (!isPeak) continue;
          const cell = y * w + x;
          const sBase = b * 2 * plane;
          const cx = (x + (offset.data[sBase + cell] as number)) * stride;
          const cy = (y + (offset.data[sBase + plane + cell] as number)) * stride;
          const bw = (size.data[sBase + cell] as number) * sizeScale;
          const bh = (size.data[sBase + plane + cell] as number) * sizeScale;
          candidates.push({
            label,
            confidence: score,
            box: { x: (cx - bw / 2) * sx, y: (cy - bh / 2) * sy, width: bw * sx, height: bh * sy },
          });
        }
      }
    }
    return nmsPerLabel(candidates, spec.nms_iou, spec.max_detections);
  });
}

/** Clamps a box to the image so a finding never points outside its frame. */
export function clampBox(box: Detection['box'], image: ImageSize): Detection['box'] {
  const x0 = Math.min(Math.max(box.x, 0), image.columns);
  const y0 = Math.min(Math.max(box.y, 0), image.rows);
  const x1 = Math.min(Math.max(box.x + box.width, 0), image.columns);
  const y1 = Math.min(Math.max(box.y + box.height, 0), image.rows);
  return { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
}
