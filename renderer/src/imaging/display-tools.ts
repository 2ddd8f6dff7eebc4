/**
 * The viewer's display tools as pure functions: rotate/flip as a 2 x 2 matrix, the patient
 * directions on the image edges (orientation markers) and the scale bar. Kept apart from the
 * canvas code so they are testable without a browser.
 */
import { spacingQualifier, type PixelSpacingSource } from '../../../common/pixel-spacing.ts';

/**
 * Screen direction = M x image direction, about the image centre: [a, b, c, d] maps image
 * (u right, v down) to screen (a*u + b*v, c*u + d*v). Entries are 0 or +-1 (quarter turns and
 * mirrors only), so the inverse is the transpose.
 */
export type Orient = readonly [number, number, number, number];

export const IDENTITY: Orient = [1, 0, 0, 1];

function times(left: Orient, right: Orient): Orient {
  const [a, b, c, d] = left;
  const [e, f, g, h] = right;
  // `+ 0` turns -0 into 0, so equal orientations compare equal.
  return [a * e + b * g + 0, a * f + b * h + 0, c * e + d * g + 0, c * f + d * h + 0];
}

/** A quarter turn clockwise on screen (y down: right becomes down). */
export const rotateClockwise = (m: Orient): Orient => times([0, -1, 1, 0], m);
/** A mirror left-right on screen, whatever the rotation so far. */
export const flipHorizontal = (m: Orient): Orient => times([-1, 0, 0, 1], m);
/** A mirror top-bottom on screen. */
export const flipVertical = (m: Orient): Orient => times([1, 0, 0, -1], m);
/** True when the image's columns run up-down on screen (a quarter turn): width and height swap. */
export const isTurned = (m: Orient): boolean => m[0] === 0;

/**
 * The size of the unrotated frame the image is fitted in: the canvas, its sides swapped when the
 * image is turned a quarter, so that a turned image still fits the canvas.
 */
export function orientedSize(size: { width: number; height: number }, m: Orient): { width: number; height: number } {
  return isTurned(m) ? { width: size.height, height: size.width } : size;
}

/** The part of CanvasRenderingContext2D used here: the tests' project has no DOM types. */
type Transformable = { translate(x: number, y: number): void; transform(a: number, b: number, c: number, d: number, e: number, f: number): void };

/**
 * Sets up `ctx` (already scaled to CSS pixels) so that drawing in the unrotated frame of
 * orientedSize() lands turned and mirrored by M about the canvas centre. With the identity it
 * changes nothing, so boxes and everything drawn through the same context follow the image.
 */
export function applyOrient(ctx: Transformable, size: { width: number; height: number }, m: Orient): void {
  if (m === IDENTITY || (m[0] === 1 && m[1] === 0 && m[2] === 0 && m[3] === 1)) return;
  const frame = orientedSize(size, m);
  ctx.translate(size.width / 2, size.height / 2);
  // ctx.transform(a, b, c, d, e, f) maps x' = a*x + c*y, y' = b*x + d*y: M's columns.
  ctx.transform(m[0], m[2], m[1], m[3], 0, 0);
  ctx.translate(-frame.width / 2, -frame.height / 2);
}

/** A screen movement (a pan drag) in the unrotated frame the image transform works in: M^T d. */
export function screenDeltaToFrame(m: Orient, dx: number, dy: number): { x: number; y: number } {
  return { x: m[0] * dx + m[2] * dy + 0, y: m[1] * dx + m[3] * dy + 0 };
}

/**
 * A point on the canvas (CSS pixels from its top-left) in the unrotated frame of orientedSize(),
 * where imageTransform's offsets and scales apply: for tools that map pointer positions to image
 * pixels (measurements) while the image is turned or mirrored.
 */
export function screenPointToFrame(m: Orient, size: { width: number; height: number }, x: number, y: number): { x: number; y: number } {
  const frame = orientedSize(size, m);
  const d = screenDeltaToFrame(m, x - size.width / 2, y - size.height / 2);
  return { x: d.x + frame.width / 2, y: d.y + frame.height / 2 };
}

/** The fit of the image in its frame: viewport.ts's Transform, by shape. */
type Fit = { scale: number; scaleY: number; offsetX: number; offsetY: number };

/**
 * Image pixel (column, row) <-> CSS pixel on the viewport, through the turn/mirror and the fit:
 * one definition for every layer that draws on the image or takes points from it.
 */
export function imagePointMapping(
  m: Orient,
  size: { width: number; height: number },
  fit: Fit,
): { toImage(x: number, y: number): [number, number]; toScreen(p: readonly [number, number]): { x: number; y: number } } {
  return {
    toImage(x, y) {
      const f = screenPointToFrame(m, size, x, y);
      return [(f.x - fit.offsetX) / fit.scale, (f.y - fit.offsetY) / fit.scaleY];
    },
    toScreen(p) {
      const frame = orientedSize(size, m);
      const dx = fit.offsetX + p[0] * fit.scale - frame.width / 2;
      const dy = fit.offsetY + p[1] * fit.scaleY - frame.height / 2;
      // screenPointToFrame applies M^T; the orientations are orthogonal, so M undoes it.
      return { x: m[0] * dx + m[1] * dy + size.width / 2, y: m[2] * dx + m[3] * dy + size.height / 2 };
    },
  };
}

type Vector = readonly [number, number, number];

/**
 * Patient direction letters of a direction in the patient coordinate system of PS3.3
 * C.7.6.2.1.1 (+x towards the patient's left, +y posterior, +z head): L/R, P/A, H/F, the
 * strongest first; an oblique direction gets two or three letters (as in PS3.3 C.7.6.1.1.1,
 * Patient Orientation), components under 0.3 are left out.
 */
export function directionLetters(v: Vector): string {
  const letters: [string, string][] = [
    ['L', 'R'],
    ['P', 'A'],
    ['H', 'F'],
  ];
  const parts = v
    .map((component, axis) => ({ component, axis }))
    .filter((p) => Math.abs(p.component) >= 0.3)
    .sort((p, q) => Math.abs(q.component) - Math.abs(p.component));
  return parts.map((p) => letters[p.axis]![p.component > 0 ? 0 : 1]).join('');
}

export type EdgeMarkers = { left: string; right: string; top: string; bottom: string };

/**
 * The patient direction at each screen edge: Image Orientation (Patient) gives the direction of
 * the first row (towards increasing column: the image's right) and of the first column (towards
 * increasing row: down). Screen right is the image direction M^T (1, 0), screen down M^T (0, 1).
 * An axial image shown as stored reads R on the left, L on the right, A at the top, P at the bottom.
 */
export function edgeMarkers(orientation: readonly number[] | null | undefined, m: Orient = IDENTITY): EdgeMarkers | null {
  if (!orientation || orientation.length !== 6 || orientation.some((x) => !Number.isFinite(x))) return null;
  const row: Vector = [orientation[0]!, orientation[1]!, orientation[2]!];
  const column: Vector = [orientation[3]!, orientation[4]!, orientation[5]!];
  const along = (u: number, v: number): Vector => [u * row[0] + v * column[0], u * row[1] + v * column[1], u * row[2] + v * column[2]];
  const right = along(m[0], m[1]);
  const down = along(m[2], m[3]);
  const negate = (x: Vector): Vector => [-x[0], -x[1], -x[2]];
  const markers = { left: directionLetters(negate(right)), right: directionLetters(right), top: directionLetters(negate(down)), bottom: directionLetters(down) };
  return markers.left && markers.right && markers.top && markers.bottom ? markers : null;
}

/**
 * A scale bar of a round length (1, 2 or 5 x 10^n mm) about a quarter of `available` screen
 * pixels long. `pixelsPerMm` is screen pixels per millimetre across (the viewer draws by physical
 * aspect, so it is the same in both directions and under rotation).
 */
export function scaleBar(
  pixelsPerMm: number,
  available: number,
  /** The instance's pixel_spacing_source: a bar from a radiograph's Imager Pixel Spacing reads "2 cm (detector)". */
  source?: PixelSpacingSource | null,
): { mm: number; pixels: number; label: string } | null {
  if (!(pixelsPerMm > 0) || !(available > 0)) return null;
  const target = (available / 4) / pixelsPerMm;
  const power = 10 ** Math.floor(Math.log10(target));
  const mm = [5, 2, 1].map((k) => k * power).find((candidate) => candidate <= target) ?? power;
  const label = `${mm >= 10 ? `${mm / 10} cm` : `${mm} mm`}${spacingQualifier(source)}`;
  return { mm, pixels: mm * pixelsPerMm, label };
}

/** The slice's position along its normal in mm (its frame's for Enhanced images), for the overlay. */
export function slicePositionMm(slice: { instance: { position: number | null; frame_values?: readonly { position: number | null }[] | null }; frame: number } | null): number | null {
  if (!slice) return null;
  return slice.instance.frame_values?.[slice.frame]?.position ?? slice.instance.position;
}
