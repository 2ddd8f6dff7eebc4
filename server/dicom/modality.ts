/**
 * The display pipeline on decoded frames, in the order PS3.4 N.2 lays down: Modality LUT
 * (rescale), VOI LUT (window), Presentation (MONOCHROME1 inversion); plus YBR to RGB for colour.
 * Pure functions over typed arrays, so the renderer, thumbnails and the model share them.
 */
import type { DecodedFrame, PixelArray } from '#server/dicom/pixel-types.ts';

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

export type Window = { center: number; width: number };

/**
 * Linear VOI LUT function of PS3.3 C.11.2.1.2.1 to 8 bits. MONOCHROME1 (minimum is white,
 * C.7.6.3.1.2) is inverted after windowing, as PS3.4 N.2.1.1 places it in the presentation step.
 */
export function windowTo8Bit(values: ArrayLike<number>, win: Window, options: { invert?: boolean } = {}): Uint8Array {
  const w = Math.max(win.width, 1);
  const c = win.center;
  const low = c - 0.5 - (w - 1) / 2;
  const high = c - 0.5 + (w - 1) / 2;
  const out = new Uint8Array(values.length);
  const invert = options.invert === true;
  for (let i = 0; i < values.length; i++) {
    const x = values[i] ?? 0;
    let y: number;
    if (x <= low) y = 0;
    else if (x > high) y = 255;
    else y = ((x - (c - 0.5)) / (w - 1) + 0.5) * 255;
    const v = Math.min(255, Math.max(0, Math.round(y)));
    out[i] = invert ? 255 - v : v;
  }
  return out;
}

export type WindowPreset = Window & { name: string };

/** Common CT presets in HU (brain, lung, bone, abdomen), as most viewers ship them. */
const CT_PRESETS: readonly WindowPreset[] = [
  { name: 'brain', center: 40, width: 80 },
  { name: 'lung', center: -600, width: 1500 },
  { name: 'bone', center: 400, width: 1800 },
  { name: 'abdomen', center: 40, width: 400 },
];

/** Value at quantile q (0..1) of `values`, by sorting a sample (at most ~64k values). */
export function percentile(values: ArrayLike<number>, q: number): number {
  const step = Math.max(1, Math.floor(values.length / 65536));
  const sample: number[] = [];
  for (let i = 0; i < values.length; i += step) sample.push(values[i] ?? 0);
  if (sample.length === 0) return 0;
  sample.sort((a, b) => a - b);
  const idx = Math.min(sample.length - 1, Math.max(0, Math.round(q * (sample.length - 1))));
  return sample[idx] ?? 0;
}

/**
 * A window spanning the 1st to 99th percentile: robust to a few hot or cold pixels. A flat frame
 * (an all-zero padding slice, a blank frame) has no contrast to show: it gets a width-1 window
 * just above its value, so it is drawn black like a blank film, not white (PS3.3 C.11.2.1.2.1
 * maps a value at the centre of a width-1 window to the top of the output range).
 */
export function windowFromPercentiles(values: ArrayLike<number>): Window {
  const lo = percentile(values, 0.01);
  const hi = percentile(values, 0.99);
  if (hi === lo) return flatWindow(hi);
  return { center: (lo + hi) / 2, width: Math.max(1, hi - lo) };
}

/** Width 1, its lower edge half a unit above `value`: `value` and below are black, higher is white. */
export function flatWindow(value: number): Window {
  return { center: value + 1, width: 1 };
}

/**
 * The one place that builds window options for an image: the file's own windows first
 * (PS3.3 C.11.2.1.2, values are in modality units), then per-modality presets; MR and anything
 * else get a window from the data's percentiles, since their units are arbitrary.
 */
export function windowOptions(
  modality: string,
  fileWindows: { windowCenter: readonly number[]; windowWidth: readonly number[] },
  values: ArrayLike<number>,
): WindowPreset[] {
  const out: WindowPreset[] = [];
  fileWindows.windowCenter.forEach((center, i) => {
    const width = fileWindows.windowWidth[i] ?? fileWindows.windowWidth[0];
    if (width !== undefined && width >= 1) out.push({ name: i === 0 ? 'file' : `file ${i + 1}`, center, width });
  });
  if (modality === 'CT') out.push(...CT_PRESETS);
  else out.push({ name: 'auto', ...windowFromPercentiles(values) });
  return out;
}
