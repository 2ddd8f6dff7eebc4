/**
 * Segmentation outputs -> per-slice regions in the ORIGINAL image's pixels, each with its mask.
 * Pure, like decode.ts: the caller hands over the output tensor's data and dims.
 *
 * Per image and label: pixels of the output plane whose probability is at or above the label's
 * threshold -> connected components (8-connectivity, labelled with a breadth-first queue over a
 * preallocated array, never recursion, so a plane-filling region cannot overflow the stack) ->
 * one region per component: its box and mask in image pixels, its confidence (the mean or the
 * max probability over its output pixels, as the manifest declares) and its area.
 *
 * Masks are stored at image resolution (docs/models.md, Segmentation models): an image pixel
 * belongs to the output pixel its centre falls in (the half-pixel mapping preprocessing uses), so
 * a mask is the component's output pixels scaled up with nearest neighbour, clipped to the image.
 * The region's box is the mask's bounding box, so the box and the mask a reader sees agree.
 */
import type { ImageSize, Tensor, DecodeOptions } from '#server/analysis/decode.ts';
import { MAX_SEGMENTATION_SIDE, type Manifest, type SegmentationOutputSpec } from '#server/analysis/manifest.ts';
import type { Detection } from '#server/analysis/nms.ts';
import { forEachMaskSpan, maskArea, type RleMask } from '#common/rle-mask.ts';

export type Region = Detection & { area_px: number; mask: RleMask };

/** The output plane's size: the declared stride's, or the tensor's own within the input's. */
function planeSize(spec: SegmentationOutputSpec, input: Manifest['input'], dims: readonly number[]): { h: number; w: number } {
  if (spec.stride !== undefined) return { h: input.size.height / spec.stride, w: input.size.width / spec.stride };
  const h = dims[2];
  const w = dims[3];
  const fits = (v: number | undefined, max: number): v is number => v !== undefined && Number.isInteger(v) && v >= 1 && v <= max;
  if (!fits(h, Math.min(input.size.height, MAX_SEGMENTATION_SIDE)) || !fits(w, Math.min(input.size.width, MAX_SEGMENTATION_SIDE))) {
    throw new RangeError(`output ${spec.tensor}: plane [${String(dims[2])}, ${String(dims[3])}] must be 1..the input size ${input.size.height} x ${input.size.width}`);
  }
  return { h, w };
}

function expectDims(name: string, t: Tensor, want: readonly number[]): void {
  const ok = t.dims.length === want.length && t.dims.every((d, i) => d === want[i]);
  if (!ok) throw new RangeError(`output ${name}: expected dims [${want.join(', ')}], got [${t.dims.join(', ')}]`);
  const n = want.reduce((a, b) => a * b, 1);
  if (t.data.length !== n) throw new RangeError(`output ${name}: expected ${n} values, got ${t.data.length}`);
}

/** Image pixels [first, last] whose centres fall in output cells [c0, c1] at `scale` pixels per cell. */
function pixelSpan(c0: number, c1: number, scale: number, limit: number): [number, number] {
  const first = Math.max(0, Math.ceil(c0 * scale - 0.5));
  const last = Math.min(limit - 1, Math.ceil((c1 + 1) * scale - 0.5) - 1);
  return [first, last];
}

/** Reused between calls: one plane's probabilities, component ids and the labelling queue. */
class Planes {
  prob = new Float32Array(0);
  ids = new Int32Array(0);
  queue = new Int32Array(0);

  ensure(size: number): void {
    if (this.prob.length >= size) return;
    this.prob = new Float32Array(size);
    this.ids = new Int32Array(size);
    this.queue = new Int32Array(size);
  }
}

type Component = { id: number; cells: number; sum: number; max: number; x0: number; y0: number; x1: number; y1: number };

/**
 * Labels the plane's pixels at or above the threshold; `ids` gets 1-based component ids (0:
 * below). Each pixel enters the queue at most once, so the queue never holds more than the plane.
 */
function components(prob: Float32Array, ids: Int32Array, queue: Int32Array, h: number, w: number, threshold: number): Component[] {
  const plane = h * w;
  ids.fill(0, 0, plane);
  const found: Component[] = [];
  for (let start = 0; start < plane; start++) {
    // `!(p >= t)` also leaves NaN out.
    if (ids[start] !== 0 || !((prob[start] as number) >= threshold)) continue;
    const id = found.length + 1;
    const c: Component = { id, cells: 0, sum: 0, max: -Infinity, x0: w, y0: h, x1: -1, y1: -1 };
    let head = 0;
    let tail = 0;
    queue[tail++] = start;
    ids[start] = id;
    while (head < tail) {
      const i = queue[head++] as number;
      const y = (i / w) | 0;
      const x = i - y * w;
      const p = prob[i] as number;
      c.cells += 1;
      c.sum += p;
      if (p > c.max) c.max = p;
      if (x < c.x0) c.x0 = x;
      if (x > c.x1) c.x1 = x;
      if (y < c.y0) c.y0 = y;
      if (y > c.y1) c.y1 = y;
      for (let dy = -1; dy <= 1; dy++) {
        const yy = y + dy;
        if (yy < 0 || yy >= h) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const xx = x + dx;
          if (xx < 0 || xx >= w) continue;
          const j = yy * w + xx;
          if (ids[j] !== 0 || !((prob[j] as number) >= threshold)) continue;
          ids[j] = id;
          queue[tail++] = j;
        }
      }
    }
    found.push(c);
  }
  return found;
}

/**
 * The component's mask in image pixels. Work is one pass per image row of the box over the
 * component's runs in the matching output row, never a pass over every pixel of the box.
 */
function componentMask(c: Component, ids: Int32Array, w: number, image: ImageSize, sx: number, sy: number): RleMask | null {
  const [px0, px1] = pixelSpan(c.x0, c.x1, sx, image.columns);
  const [py0, py1] = pixelSpan(c.y0, c.y1, sy, image.rows);
  if (px1 < px0 || py1 < py0) return null;
  // Runs of the component per output row, as image column spans.
  const rowRuns = new Map<number, [number, number][]>();
  for (let y = c.y0; y <= c.y1; y++) {
    const runs: [number, number][] = [];
    for (let x = c.x0; x <= c.x1; x++) {
      if (ids[y * w + x] !== c.id) continue;
      let end = x;
      while (end + 1 <= c.x1 && ids[y * w + end + 1] === c.id) end += 1;
      const [a, b] = pixelSpan(x, end, sx, image.columns);
      if (b >= a) runs.push([a, b]);
      x = end;
    }
    rowRuns.set(y, runs);
  }
  const width = px1 - px0 + 1;
  const counts: number[] = [];
  // Position (row-major within the box) where the current outside run started.
  let cursor = 0;
  let pixels = 0;
  let minX = Infinity;
  let maxX = -Infinity;
  let minY = Infinity;
  let maxY = -Infinity;
  for (let py = py0; py <= py1; py++) {
    const cy = Math.min(Math.floor((py + 0.5) / sy), c.y1);
    for (const [a, b] of rowRuns.get(cy) ?? []) {
      const at = (py - py0) * width + (a - px0);
      if (counts.length > 0 && at === cursor) {
        // Touches the previous inside run (it ended at the row's last column): extend it.
        counts[counts.length - 1] = (counts[counts.length - 1] as number) + (b - a + 1);
      } else {
        counts.push(at - cursor, b - a + 1);
      }
      cursor = at + (b - a + 1);
      pixels += b - a + 1;
      minX = Math.min(minX, a);
      maxX = Math.max(maxX, b);
      minY = Math.min(minY, py);
      maxY = Math.max(maxY, py);
    }
  }
  if (pixels === 0) return null;
  const height = py1 - py0 + 1;
  counts.push(width * height - cursor);
  if (minX === px0 && maxX === px1 && minY === py0 && maxY === py1) return { encoding: 'rle', x: px0, y: py0, width, height, counts };
  // Spans clipped at the image edge can leave the computed box wider than the pixels: re-encode tight.
  return reencode({ encoding: 'rle', x: px0, y: py0, width, height, counts }, { x: minX, y: minY, width: maxX - minX + 1, height: maxY - minY + 1 });
}

/** The same pixels over a smaller box that still holds all of them. */
function reencode(mask: RleMask, box: { x: number; y: number; width: number; height: number }): RleMask {
  const counts: number[] = [];
  let cursor = 0;
  forEachMaskSpan(mask, (row, first, last) => {
    const at = (row - box.y) * box.width + (first - box.x);
    const take = last - first + 1;
    if (counts.length > 0 && at === cursor) counts[counts.length - 1] = (counts[counts.length - 1] as number) + take;
    else counts.push(at - cursor, take);
    cursor = at + take;
  });
  counts.push(box.width * box.height - cursor);
  return { encoding: 'rle', ...box, counts };
}

const sigmoid = (v: number): number => 1 / (1 + Math.exp(-v));

export type SegmentationOptions = DecodeOptions & {
  /** Pixel spacing (row, column mm) of each image, in batch order; null when unknown. */
  spacings?: readonly ({ row: number; column: number } | null)[];
};

/**
 * Decodes a batch. Returns one list of regions per image, the most confident first, at most
 * output.max_regions of them, after the per-label thresholds and the minimum region size.
 */
export function decodeSegmentation(
  outputs: Readonly<Record<string, Tensor>>,
  manifest: Pick<Manifest, 'input' | 'labels'> & { output: SegmentationOutputSpec },
  images: readonly ImageSize[],
  options: SegmentationOptions = {},
  planes = new Planes(),
): Region[][] {
  const spec = manifest.output;
  const t = outputs[spec.tensor];
  if (t === undefined) throw new RangeError(`model output ${spec.tensor} missing (have ${Object.keys(outputs).join(', ')})`);
  const n = images.length;
  const background = spec.background_channel;
  const total = spec.channels.length + (background === undefined ? 0 : 1);
  const { h, w } = planeSize(spec, manifest.input, t.dims);
  expectDims(spec.tensor, t, [n, total, h, w]);
  const plane = h * w;
  planes.ensure(plane);

  const thresholds = spec.channels.map((label) => {
    const override = options.thresholds?.[label];
    if (override !== undefined) return override;
    const entry = manifest.labels.find((l) => l.label === label);
    if (entry === undefined) throw new RangeError(`no label entry for output channel ${label}`);
    return entry.threshold;
  });
  // Tensor channel of each label: the labels fill the channels around the background one.
  const tensorChannel = spec.channels.map((_, i) => (background !== undefined && i >= background ? i + 1 : i));

  return images.map((image, b) => {
    const sx = image.columns / w;
    const sy = image.rows / h;
    const spacing = options.spacings?.[b] ?? null;
    const minArea = Math.max(spec.min_region_px, spacing && spec.min_region_mm2 !== undefined ? spec.min_region_mm2 / (spacing.row * spacing.column) : 0);
    const regions: Region[] = [];
    for (let c = 0; c < spec.channels.length; c++) {
      fillProbabilities(t.data, planes.prob, spec.activation, b, tensorChannel[c] as number, total, plane);
      for (const comp of components(planes.prob, planes.ids, planes.queue, h, w, thresholds[c] as number)) {
        const mask = componentMask(comp, planes.ids, w, image, sx, sy);
        if (mask === null) continue;
        const area = maskArea(mask);
        if (area < minArea) continue;
        regions.push({
          label: spec.channels[c] as string,
          confidence: spec.confidence === 'max' ? comp.max : comp.sum / comp.cells,
          box: { x: mask.x, y: mask.y, width: mask.width, height: mask.height },
          area_px: area,
          mask,
        });
      }
    }
    regions.sort((a, b2) => b2.confidence - a.confidence);
    return regions.slice(0, spec.max_regions);
  });
}

/** One label's probabilities for image b into `out`; softmax is over all the tensor's channels. */
function fillProbabilities(data: Float32Array, out: Float32Array, activation: SegmentationOutputSpec['activation'], b: number, channel: number, total: number, plane: number): void {
  const base = (b * total + channel) * plane;
  if (activation === 'sigmoid_applied' || activation === 'softmax_applied') {
    // An infinite "probability" is a broken model, not certainty: like NaN, no threshold admits it.
    for (let i = 0; i < plane; i++) {
      const v = data[base + i] as number;
      out[i] = Number.isFinite(v) ? v : Number.NaN;
    }
    return;
  }
  if (activation === 'sigmoid') {
    for (let i = 0; i < plane; i++) out[i] = sigmoid(data[base + i] as number);
    return;
  }
  const first = b * total * plane;
  for (let i = 0; i < plane; i++) {
    let max = -Infinity;
    for (let k = 0; k < total; k++) max = Math.max(max, data[first + k * plane + i] as number);
    let sum = 0;
    for (let k = 0; k < total; k++) sum += Math.exp((data[first + k * plane + i] as number) - max);
    // A NaN or infinite logit makes the pixel NaN, which no threshold admits.
    out[i] = Math.exp((data[base + i] as number) - max) / sum;
  }
}

export { Planes as SegmentationPlanes };
export type { RleMask };
