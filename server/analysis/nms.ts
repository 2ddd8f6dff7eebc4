/** Box geometry and per-label non-maximum suppression, in whatever pixel grid the boxes use. */

/** Pixels, origin top-left, x right, y down (PRODUCT.md, Finding). */
export type Box = { x: number; y: number; width: number; height: number };

export type Detection = { label: string; confidence: number; box: Box };

export function iou(a: Box, b: Box): number {
  const iw = Math.max(0, Math.min(a.x + a.width, b.x + b.width) - Math.max(a.x, b.x));
  const ih = Math.max(0, Math.min(a.y + a.height, b.y + b.height) - Math.max(a.y, b.y));
  const inter = iw * ih;
  const union = a.width * a.height + b.width * b.height - inter;
  return union > 0 ? inter / union : 0;
}

/**
 * Greedy NMS within each label: walk by descending confidence and keep a box unless it
 * overlaps an already kept box of the same label by more than `iouThreshold`. Different labels
 * never suppress each other, so a haemorrhage inside a tumour stays visible to the reader.
 * The result is sorted by confidence (stable) and cut to `maxDetections`.
 */
export function nmsPerLabel<T extends Detection>(detections: readonly T[], iouThreshold: number, maxDetections = Infinity): T[] {
  const byLabel = new Map<string, T[]>();
  for (const d of detections) {
    const list = byLabel.get(d.label);
    if (list) list.push(d);
    else byLabel.set(d.label, [d]);
  }
  const kept: T[] = [];
  for (const list of byLabel.values()) {
    const sorted = [...list].sort((a, b) => b.confidence - a.confidence);
    const keptHere: T[] = [];
    for (const d of sorted) {
      if (keptHere.every((k) => iou(k.box, d.box) <= iouThreshold)) keptHere.push(d);
    }
    kept.push(...keptHere);
  }
  kept.sort((a, b) => b.confidence - a.confidence);
  return kept.slice(0, maxDetections);
}
