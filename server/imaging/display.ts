/**
 * From decoded frames to what a screen shows: modality values windowed to 8 bits (grey), or
 * 8-bit RGB, and downscaling for thumbnails. Uses the one window-options builder in
 * dicom/modality so the viewer, thumbnails and the model agree on defaults.
 */
import type { DecodedFrame } from '#server/dicom/pixel-types.ts';
import { applyRescale, toRgbFrame, windowOptions, windowTo8Bit, type Window } from '#server/dicom/modality.ts';

export type DisplayImage = { pixels: Uint8Array; width: number; height: number; channels: 1 | 3; window: Window | null };

export type DisplaySettings = {
  modality: string;
  rescaleSlope: number;
  rescaleIntercept: number;
  windowCenter: readonly number[];
  windowWidth: readonly number[];
};

/** The window used when the client gives none: the file's first, else the modality's default. */
export function defaultWindow(frame: DecodedFrame, settings: DisplaySettings): Window | null {
  if (frame.samplesPerPixel !== 1) return null;
  const values = applyRescale(frame.pixels, settings.rescaleSlope, settings.rescaleIntercept);
  const [first] = windowOptions(settings.modality, settings, values);
  return first ? { center: first.center, width: first.width } : null;
}

export function toDisplay(frame: DecodedFrame, settings: DisplaySettings, requested: Window | undefined): DisplayImage {
  const { rows: height, columns: width } = frame;
  if (frame.samplesPerPixel === 3) {
    // Colour samples are display values already (PS3.3 C.7.6.3.1.2); only the depth changes.
    const rgb = toRgbFrame(frame);
    const source = rgb.pixels;
    const max = 2 ** Math.max(1, Math.min(rgb.bitsStored, 16)) - 1;
    const out = new Uint8Array(source.length);
    if (max === 255) out.set(source);
    else for (let i = 0; i < source.length; i++) out[i] = Math.round(((source[i] ?? 0) / max) * 255);
    return { pixels: out, width, height, channels: 3, window: null };
  }
  const values = applyRescale(frame.pixels, settings.rescaleSlope, settings.rescaleIntercept);
  const win = requested ?? (() => {
    const [first] = windowOptions(settings.modality, settings, values);
    return first ? { center: first.center, width: first.width } : { center: 128, width: 256 };
  })();
  // MONOCHROME1: minimum is white (PS3.3 C.7.6.3.1.2), inverted after the VOI LUT (PS3.4 N.2.1.1).
  const pixels = windowTo8Bit(values, win, { invert: frame.photometricInterpretation === 'MONOCHROME1' });
  return { pixels, width, height, channels: 1, window: win };
}

/**
 * Box-filter downscale so the longest side is at most `maxSide` (thumbnails), at the physical
 * aspect: `aspect` is a pixel's height over its width (pixelAspect), so rows of non-square
 * pixels are stretched or squeezed to match, as the viewer draws them (issue 11).
 */
export function downscale(image: DisplayImage, maxSide: number, aspect = 1): DisplayImage {
  const physicalHeight = image.height * aspect;
  const scale = Math.max(1, Math.max(image.width, physicalHeight) / maxSide);
  const width = Math.max(1, Math.round(image.width / scale));
  const height = Math.max(1, Math.round(physicalHeight / scale));
  if (width === image.width && height === image.height) return image;
  const c = image.channels;
  const out = new Uint8Array(width * height * c);
  for (let y = 0; y < height; y++) {
    const y0 = Math.floor((y * image.height) / height);
    const y1 = Math.max(y0 + 1, Math.floor(((y + 1) * image.height) / height));
    for (let x = 0; x < width; x++) {
      const x0 = Math.floor((x * image.width) / width);
      const x1 = Math.max(x0 + 1, Math.floor(((x + 1) * image.width) / width));
      for (let k = 0; k < c; k++) {
        let sum = 0;
        for (let yy = y0; yy < y1; yy++) for (let xx = x0; xx < x1; xx++) sum += image.pixels[(yy * image.width + xx) * c + k] ?? 0;
        out[(y * width + x) * c + k] = Math.round(sum / ((y1 - y0) * (x1 - x0)));
      }
    }
  }
  return { ...image, pixels: out, width, height };
}

/** The longest side a physical-aspect PNG is stretched to; past it the other side shrinks instead. */
const MAX_PHYSICAL_SIDE = 8192;

/**
 * The image resampled so each output pixel is square in the patient: with pixels `aspect` times
 * as tall as wide (row spacing / column spacing, PS3.3 10.7.1.3), the coarser axis is stretched
 * to the finer one's spacing (no detail is dropped), by bilinear interpolation between pixel
 * centres (a nearest pick would show steps; an area mean only fits shrinking).
 */
export function resampleToAspect(image: DisplayImage, aspect: number): DisplayImage {
  if (aspect === 1) return image;
  let width = aspect < 1 ? image.width / aspect : image.width;
  let height = aspect > 1 ? image.height * aspect : image.height;
  const longest = Math.max(width, height);
  const limit = Math.max(MAX_PHYSICAL_SIDE, image.width, image.height);
  if (longest > limit) {
    width = (width * limit) / longest;
    height = (height * limit) / longest;
  }
  width = Math.max(1, Math.round(width));
  height = Math.max(1, Math.round(height));
  if (width === image.width && height === image.height) return image;
  const c = image.channels;
  const out = new Uint8Array(width * height * c);
  const sx = image.width / width;
  const sy = image.height / height;
  const clamp = (v: number, max: number): number => (v < 0 ? 0 : v > max ? max : v);
  for (let y = 0; y < height; y++) {
    const fy = clamp((y + 0.5) * sy - 0.5, image.height - 1);
    const y0 = Math.floor(fy);
    const y1 = Math.min(y0 + 1, image.height - 1);
    const ty = fy - y0;
    for (let x = 0; x < width; x++) {
      const fx = clamp((x + 0.5) * sx - 0.5, image.width - 1);
      const x0 = Math.floor(fx);
      const x1 = Math.min(x0 + 1, image.width - 1);
      const tx = fx - x0;
      for (let k = 0; k < c; k++) {
        const at = (yy: number, xx: number): number => image.pixels[(yy * image.width + xx) * c + k] ?? 0;
        const top = at(y0, x0) * (1 - tx) + at(y0, x1) * tx;
        const bottom = at(y1, x0) * (1 - tx) + at(y1, x1) * tx;
        out[(y * width + x) * c + k] = Math.round(top * (1 - ty) + bottom * ty);
      }
    }
  }
  return { ...image, pixels: out, width, height };
}

/** Stored values as little-endian bytes (the raw endpoint's body). */
export function littleEndianBytes(frame: DecodedFrame): { body: Uint8Array; bitsAllocated: number } {
  const p = frame.pixels;
  const bitsAllocated = p.BYTES_PER_ELEMENT * 8;
  const view = new Uint8Array(p.buffer, p.byteOffset, p.byteLength);
  if (p.BYTES_PER_ELEMENT === 1 || new Uint8Array(new Uint16Array([1]).buffer)[0] === 1) return { body: view, bitsAllocated };
  // Big-endian host: swap each sample.
  const out = new Uint8Array(view.length);
  const n = p.BYTES_PER_ELEMENT;
  for (let i = 0; i < view.length; i += n) for (let k = 0; k < n; k++) out[i + k] = view[i + n - 1 - k] ?? 0;
  return { body: out, bitsAllocated };
}
