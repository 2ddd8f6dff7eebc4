/**
 * A segmentation finding's mask (issue 16, docs/models.md, Segmentation models): a binary mask
 * over a box of the image its finding is on, in that image's pixels, run-length encoded row by
 * row (row-major, the box's top row first). `counts` alternate runs of pixels outside and inside
 * the region, starting with an outside run (0 when the box's first pixel is inside), and add up
 * to width * height. One definition for the server, which writes and checks them, and the
 * viewer, which draws them. Pure; imports nothing.
 */
export type RleMask = { encoding: 'rle'; x: number; y: number; width: number; height: number; counts: number[] };

/** Pixels inside the region. */
export function maskArea(mask: RleMask): number {
  let area = 0;
  for (let k = 1; k < mask.counts.length; k += 2) area += mask.counts[k] as number;
  return area;
}

/** Why the mask is not well formed (runs that do not cover its box exactly), or null. */
export function maskProblem(mask: RleMask): string | null {
  let total = 0;
  for (const c of mask.counts) {
    if (!Number.isInteger(c) || c < 0) return 'counts must be integers >= 0';
    total += c;
  }
  if (total !== mask.width * mask.height) return `counts add up to ${total}, expected width * height = ${mask.width * mask.height}`;
  return null;
}

/**
 * Calls `span(row, first, last)` for each run of inside pixels on one image row (image
 * coordinates, inclusive), in order. Work is one call per run, not one per pixel.
 */
export function forEachMaskSpan(mask: RleMask, span: (row: number, first: number, last: number) => void): void {
  let pos = 0;
  for (let k = 0; k < mask.counts.length; k++) {
    const run = mask.counts[k] as number;
    if (k % 2 === 1) {
      let start = pos;
      const end = pos + run;
      while (start < end) {
        const row = Math.floor(start / mask.width);
        const col = start - row * mask.width;
        const take = Math.min(end - start, mask.width - col);
        span(mask.y + row, mask.x + col, mask.x + col + take - 1);
        start += take;
      }
    }
    pos += run;
  }
}
