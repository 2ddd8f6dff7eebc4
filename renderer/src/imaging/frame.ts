/**
 * Turning a frame from GET /v1/instances/{uid}/frames/{n}/raw (decoded stored values, little
 * endian, described by X-* headers) into screen pixels: modality rescale, then the linear VOI
 * function of DICOM PS3.3 C.11.2.1.2.1, MONOCHROME1 inverted. The server already decoded every
 * transfer syntax, so the renderer only windows; see renderer/README.md for why this is drawn on
 * a 2D canvas rather than through Cornerstone3D.
 */

import { autoWindow as sharedAutoWindow, CT_WINDOW_PRESETS, windowInto, type Window } from '../../../common/windowing.ts';

export type { Window } from '../../../common/windowing.ts';

export type RawFrame = {
  rows: number;
  columns: number;
  samplesPerPixel: number;
  /** Modality values (stored * slope + intercept) for grey images; RGB bytes for colour. */
  values: Float32Array | Uint8Array;
  photometric: string;
  defaultWindow: Window | null;
  /** Smallest and largest modality value: the range that sets window drag sensitivity. */
  min: number;
  max: number;
};

function headerNumber(headers: Headers, name: string, fallback: number): number {
  const value = headers.get(name);
  if (value === null || value.trim() === '') return fallback;
  const first = Number(value.split('\\')[0]);
  return Number.isFinite(first) ? first : fallback;
}

export function parseRawFrame(buffer: ArrayBuffer, headers: Headers): RawFrame {
  const rows = headerNumber(headers, 'X-Rows', 0);
  const columns = headerNumber(headers, 'X-Columns', 0);
  const samplesPerPixel = headerNumber(headers, 'X-Samples-Per-Pixel', 1);
  const bitsAllocated = headerNumber(headers, 'X-Bits-Allocated', 16);
  const signed = headerNumber(headers, 'X-Pixel-Representation', 0) === 1;
  const slope = headerNumber(headers, 'X-Rescale-Slope', 1);
  const intercept = headerNumber(headers, 'X-Rescale-Intercept', 0);
  const center = headers.get('X-Window-Center');
  const width = headers.get('X-Window-Width');
  const photometric = (headers.get('X-Photometric-Interpretation') ?? 'MONOCHROME2').trim().toUpperCase();
  const count = rows * columns * samplesPerPixel;
  if (rows <= 0 || columns <= 0) throw new Error('frame without rows or columns');

  if (samplesPerPixel === 3) {
    return { rows, columns, samplesPerPixel, values: new Uint8Array(buffer, 0, count), photometric, defaultWindow: null, min: 0, max: 255 };
  }
  const view = new DataView(buffer);
  const bytes = bitsAllocated <= 8 ? 1 : bitsAllocated <= 16 ? 2 : 4;
  if (buffer.byteLength < count * bytes) throw new Error(`frame has ${buffer.byteLength} bytes, expected ${count * bytes}`);
  const values = new Float32Array(count);
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < count; i += 1) {
    let stored: number;
    if (bytes === 1) stored = signed ? view.getInt8(i) : view.getUint8(i);
    else if (bytes === 2) stored = signed ? view.getInt16(i * 2, true) : view.getUint16(i * 2, true);
    else stored = signed ? view.getInt32(i * 4, true) : view.getUint32(i * 4, true);
    const value = stored * slope + intercept;
    values[i] = value;
    if (value < min) min = value;
    if (value > max) max = value;
  }
  const defaultWindow =
    center !== null && width !== null && center.trim() !== '' && width.trim() !== ''
      ? { center: headerNumber(headers, 'X-Window-Center', 0), width: headerNumber(headers, 'X-Window-Width', 1) }
      : null;
  return { rows, columns, samplesPerPixel, values, photometric, defaultWindow, min, max };
}

/**
 * The automatic window, the same rule as the server's (common/windowing.ts): 1st to 99th
 * percentile; a flat frame gets a width-1 window just above its value, so it is drawn black.
 */
export function autoWindow(frame: RawFrame): Window {
  return sharedAutoWindow(frame.values);
}

/** Writes RGBA pixels of `frame` under `window` into `out` (rows * columns * 4 bytes); `invert` is the reader's, on top of MONOCHROME1. */
export function renderFrame(frame: RawFrame, window: Window, out: Uint8ClampedArray, options: { invert?: boolean } = {}): void {
  const pixels = frame.rows * frame.columns;
  if (frame.samplesPerPixel === 3) {
    const rgb = frame.values;
    // The reader's invert applies to colour too (each channel, 255 - v); there is no window.
    const flip = options.invert === true ? 255 : 0;
    for (let i = 0; i < pixels; i += 1) {
      out[i * 4] = Math.abs(flip - (rgb[i * 3] ?? 0));
      out[i * 4 + 1] = Math.abs(flip - (rgb[i * 3 + 1] ?? 0));
      out[i * 4 + 2] = Math.abs(flip - (rgb[i * 3 + 2] ?? 0));
      out[i * 4 + 3] = 255;
    }
    return;
  }
  // The server's VOI function itself (common/windowing.ts), so the canvas equals its PNGs.
  windowInto(frame.values.subarray(0, pixels), window, out, { invert: (frame.photometric === 'MONOCHROME1') !== (options.invert === true), channels: 4 });
}

export type Preset = { key: string; name: string; window: Window | 'default' | 'auto' };

/**
 * Window presets by modality, keyed 1, 2...: the file's (or modality default) window, then the
 * shared CT presets (common/windowing.ts, the server's too); other modalities get the shared
 * automatic window.
 */
export function presetsFor(modality: string): Preset[] {
  const first: Preset = { key: '1', name: 'Default', window: 'default' };
  if (modality === 'CT') {
    return [first, ...CT_WINDOW_PRESETS.map((p, i): Preset => ({ key: String(i + 2), name: p.label, window: { center: p.center, width: p.width } }))];
  }
  return [first, { key: '2', name: 'Auto', window: 'auto' }];
}

/**
 * Window/level while dragging: right widens the window, down raises the level (the existing
 * direction, as in Cornerstone's WindowLevel tool). Sensitivity follows the window being
 * adjusted - 1/256 of its width per screen pixel, so a 256 px drag changes it by its own size -
 * with a floor of 1/4096 of the image's value range. A brain window (W 80) then moves about
 * 1 HU per pixel on CT and a bone window (W 2800) about 11, where one step of 1/256 of the whole
 * value range used to be 9-16 HU whatever the window.
 */
export function dragWindow(start: Window, dx: number, dy: number, valueRange: number): Window {
  const unit = Math.max(start.width / 256, Math.max(0, valueRange) / 4096);
  return { center: start.center + dy * unit, width: Math.max(1, start.width + dx * unit) };
}
