/**
 * Image-to-screen mapping and drawing of one slice with its finding boxes on a 2D canvas.
 * Boxes are in pixels of the referenced image, origin top-left, y down (PRODUCT.md, Finding),
 * so they go through the same transform as the image itself. A finding about the whole image (a
 * slice classifier's) is no box: it is drawn as a dashed frame round the image (and named in a banner by the viewer), so
 * nobody reads the image's edges as a lesion's.
 */
import type { Finding } from '../api/types.ts';
import { labelText, percent } from '../format.ts';
import { forEachMaskSpan } from '../../../common/rle-mask.ts';

export type View = { zoom: number; panX: number; panY: number };
/** Screen pixels per image column (scale) and per image row (scaleY): they differ for non-square pixels. */
export type Transform = { scale: number; scaleY: number; offsetX: number; offsetY: number };

export const BOX_COLOURS = { pending: '#ffcc00', accepted: '#3fb950', rejected: '#f85149', current: '#00e5ff' } as const;

// One definition with the server's thumbnails.
export { pixelAspect } from '../../../common/pixel-aspect.ts';

/**
 * Fits the image in the canvas (CSS pixels) at its physical aspect (rows are `aspect` times as
 * tall as columns are wide), then applies zoom about the centre and pan.
 */
export function imageTransform(canvasWidth: number, canvasHeight: number, columns: number, rows: number, view: View, aspect = 1): Transform {
  const fit = Math.min(canvasWidth / columns, canvasHeight / (rows * aspect));
  const scale = fit * view.zoom;
  const scaleY = scale * aspect;
  return {
    scale,
    scaleY,
    offsetX: (canvasWidth - columns * scale) / 2 + view.panX,
    offsetY: (canvasHeight - rows * scaleY) / 2 + view.panY,
  };
}

export function toScreen(t: Transform, x: number, y: number): { x: number; y: number } {
  return { x: t.offsetX + x * t.scale, y: t.offsetY + y * t.scaleY };
}

export type DrawOptions = {
  image: CanvasImageSource | null;
  columns: number;
  rows: number;
  findings: readonly Finding[];
  currentFindingId: string | null;
  showBoxes: boolean;
};

/** How opaque a segmentation mask is drawn: the tissue under it must stay readable. */
export const MASK_ALPHA = 0.35;

/**
 * A segmentation finding's mask, filled translucent in its box's colour: painted once at image
 * resolution into a scratch canvas the size of the mask's box (no larger than the frame the
 * viewer already holds), then drawn through the image transform without smoothing, so pixels
 * stay pixels and neighbouring rows meet without seams. Returns whether anything was drawn.
 */
function drawMask(ctx: CanvasRenderingContext2D, t: Transform, finding: Finding, colour: string, columns: number, rows: number): boolean {
  const mask = finding.mask;
  if (!mask || mask.x + mask.width > columns || mask.y + mask.height > rows) return false;
  const scratch = document.createElement('canvas');
  scratch.width = mask.width;
  scratch.height = mask.height;
  const scratchCtx = scratch.getContext('2d');
  if (!scratchCtx) return false;
  const pixels = scratchCtx.createImageData(mask.width, mask.height);
  const [r, g, b] = [1, 3, 5].map((i) => parseInt(colour.slice(i, i + 2), 16)) as [number, number, number];
  forEachMaskSpan(mask, (row, first, last) => {
    for (let x = first; x <= last; x++) {
      const at = ((row - mask.y) * mask.width + (x - mask.x)) * 4;
      pixels.data[at] = r;
      pixels.data[at + 1] = g;
      pixels.data[at + 2] = b;
      pixels.data[at + 3] = 255;
    }
  });
  scratchCtx.putImageData(pixels, 0, 0);
  const at = toScreen(t, mask.x, mask.y);
  ctx.globalAlpha = MASK_ALPHA;
  ctx.imageSmoothingEnabled = false;
  ctx.drawImage(scratch, at.x, at.y, mask.width * t.scale, mask.height * t.scaleY);
  ctx.globalAlpha = 1;
  return true;
}

/** Returns the number of segmentation masks drawn (the e2e tests read it from the canvas). */
export function drawSlice(ctx: CanvasRenderingContext2D, width: number, height: number, t: Transform, options: DrawOptions): number {
  let masks = 0;
  ctx.save();
  ctx.fillStyle = '#000';
  ctx.fillRect(0, 0, width, height);
  if (options.image) {
    // Interpolated display, as reading workstations do; boxes are drawn crisp on top.
    ctx.imageSmoothingEnabled = true;
    ctx.drawImage(options.image, t.offsetX, t.offsetY, options.columns * t.scale, options.rows * t.scaleY);
  }
  if (options.showBoxes) {
    ctx.font = '600 13px system-ui, sans-serif';
    ctx.textBaseline = 'bottom';
    let framed = 0;
    for (const finding of options.findings) {
      const current = finding.id === options.currentFindingId;
      const colour = finding.review ? BOX_COLOURS[finding.review] : current ? BOX_COLOURS.current : BOX_COLOURS.pending;
      if (finding.localization === 'image') {
        drawImageLevel(ctx, t, options, colour, current, framed);
        framed += 1;
        continue;
      }
      // Under its box and label, and shown and hidden with them.
      if (finding.review !== 'rejected' && drawMask(ctx, t, finding, colour, options.columns, options.rows)) masks += 1;
      const topLeft = toScreen(t, finding.location.x, finding.location.y);
      const w = finding.location.width * t.scale;
      const h = finding.location.height * t.scaleY;
      ctx.strokeStyle = colour;
      ctx.lineWidth = current ? 3 : 2;
      ctx.setLineDash(finding.review === 'rejected' ? [6, 4] : []);
      ctx.strokeRect(topLeft.x, topLeft.y, w, h);
      const text = `${labelText(finding.label)} ${finding.source === 'reader' ? '(reader)' : percent(finding.confidence)}${finding.review ? ` · ${finding.review}` : ''}`;
      const textWidth = ctx.measureText(text).width;
      const labelY = topLeft.y > 20 ? topLeft.y - 3 : topLeft.y + h + 18;
      ctx.fillStyle = 'rgba(0,0,0,0.65)';
      ctx.fillRect(topLeft.x - 1, labelY - 16, textWidth + 8, 17);
      ctx.fillStyle = colour;
      ctx.fillText(text, topLeft.x + 3, labelY);
    }
  }
  ctx.restore();
  return masks;
}

/** A whole-image finding: a dashed frame just inside the image (the viewer says what it is in
 * words, in a banner over the viewport, where overlay text cannot hide it). */
function drawImageLevel(ctx: CanvasRenderingContext2D, t: Transform, options: DrawOptions, colour: string, current: boolean, stacked: number): void {
  const topLeft = toScreen(t, 0, 0);
  const inset = 2 + stacked * 5;
  ctx.strokeStyle = colour;
  ctx.lineWidth = current ? 3 : 2;
  ctx.setLineDash([10, 6]);
  ctx.strokeRect(topLeft.x + inset, topLeft.y + inset, options.columns * t.scale - 2 * inset, options.rows * t.scaleY - 2 * inset);
  ctx.setLineDash([]);
}
