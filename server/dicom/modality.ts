/**
 * The display pipeline on decoded frames, in the order PS3.4 N.2 lays down: Modality LUT
 * (rescale), VOI LUT (window), Presentation (MONOCHROME1 inversion); plus YBR to RGB for colour.
 * Pure functions over typed arrays, so the renderer, thumbnails and the model share them.
 */
import type { DecodedFrame, PixelArray } from '#server/dicom/pixel-types.ts';
import { windowInto, type Window } from '#common/windowing.ts';

export type ModalityValues = Int32Array | Float32Array;

/**
 * Rescale Slope/Intercept (PS3.3 C.11.1.1.2): output units are modality units (HU for CT).
 * Integer slope and intercept keep integer values, so exact HU stay exact.
 */
export function applyRescale(pixels: PixelArray, slope: number, intercept: number): ModalityValues {
  const integral = Number.isInteger(slope) && Number.isInteger(intercept) && !(pixels instanceof Float32Array);
  const out = integral ? new Int32Array(pixels.length) : new Float32Array(pixels.length);
  for (let i = 0; i < pixels.length; i++) out[i] = (pixels[i] ?? 0) * slope + intercept;
  return out;
}

/**
 * YBR_FULL to RGB (PS3.3 C.7.6.3.1.2, the JFIF/T.871 equations), rounded and clamped to the
 * sample range. YBR_FULL_422 frames arrive here already upsampled by the decoder.
 */
export function ybrFullToRgb(ybr: Uint8Array | Uint16Array, bitsStored: number): Uint8Array | Uint16Array {
  const max = 2 ** bitsStored - 1;
  const half = 2 ** (bitsStored - 1);
  const out = ybr instanceof Uint8Array ? new Uint8Array(ybr.length) : new Uint16Array(ybr.length);
  const clamp = (v: number): number => Math.min(max, Math.max(0, Math.round(v)));
  for (let i = 0; i + 2 < ybr.length; i += 3) {
    const y = ybr[i] ?? 0;
    const cb = (ybr[i + 1] ?? 0) - half;
    const cr = (ybr[i + 2] ?? 0) - half;
    out[i] = clamp(y + 1.402 * cr);
    out[i + 1] = clamp(y - 0.344136 * cb - 0.714136 * cr);
    out[i + 2] = clamp(y + 1.772 * cb);
  }
  return out;
}

/** Converts a decoded colour frame to RGB when it is YBR_FULL; other frames pass through. */
export function toRgbFrame(frame: DecodedFrame): DecodedFrame {
  const p = frame.pixels;
  if (frame.samplesPerPixel !== 3 || !frame.photometricInterpretation.startsWith('YBR_FULL')) return frame;
  if (!(p instanceof Uint8Array || p instanceof Uint16Array)) return frame;
  return { ...frame, pixels: ybrFullToRgb(p, frame.bitsStored), photometricInterpretation: 'RGB' };
}

export type { Window, WindowPreset } from '#common/windowing.ts';
// One windowing definition with the renderer (issue 11): presets, the automatic window and the
// VOI function live in common/windowing.ts.
export { autoWindow as windowFromPercentiles, flatWindow, percentile, windowOptions } from '#common/windowing.ts';

/**
 * Linear VOI LUT function of PS3.3 C.11.2.1.2.1 to 8 bits (common/windowing.ts). MONOCHROME1
 * (minimum is white, C.7.6.3.1.2) is inverted after windowing, as PS3.4 N.2.1.1 places it.
 */
export function windowTo8Bit(values: ArrayLike<number>, win: Window, options: { invert?: boolean } = {}): Uint8Array {
  const out = new Uint8Array(values.length);
  windowInto(values, win, out, { invert: options.invert === true, channels: 1 });
  return out;
}
