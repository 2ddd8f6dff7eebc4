/**
 * Turning a frame from GET /v1/instances/{uid}/frames/{n}/raw (decoded stored values, little
 * endian, described by X-* headers) into screen pixels: modality rescale, then the linear VOI
 * function of DICOM PS3.3 C.11.2.1.2.1, MONOCHROME1 inverted. The server already decoded every
 * transfer syntax, so the renderer only windows; see renderer/README.md for why this is drawn on
 * a 2D canvas rather than through Cornerstone3D.
 */

export type Window = { center: number; width: number };

export type RawFrame = {
  rows: number;
  columns: number;
  samplesPerPixel: number;
  /** Modality values (stored * slope + intercept) for grey images; RGB bytes for colour. */
  values: Float32Array | Uint8Array;
  photometric: string;
  defaultWindow: Window | null;
  /** Smallest and largest modality value, for the auto window. */
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
 * The full value range. A flat frame (all zero, blank) has no contrast to show: as on the server
 * (windowFromPercentiles), its width-1 window sits just above the value, so it is drawn black
 * rather than white (a value at the centre of a width-1 window maps to white, PS3.3 C.11.2.1.2.1).
 */
export function autoWindow(frame: RawFrame): Window {
  if (frame.max === frame.min) return { center: frame.max + 1, width: 1 };
  return { center: (frame.min + frame.max) / 2, width: Math.max(1, frame.max - frame.min) };
}

/** Writes RGBA pixels of `frame` under `window` into `out` (rows * columns * 4 bytes). */
export function renderFrame(frame: RawFrame, window: Window, out: Uint8ClampedArray): void {
  const pixels = frame.rows * frame.columns;
  if (frame.samplesPerPixel === 3) {
    const rgb = frame.values;
    for (let i = 0; i < pixels; i += 1) {
      out[i * 4] = rgb[i * 3] ?? 0;
      out[i * 4 + 1] = rgb[i * 3 + 1] ?? 0;
      out[i * 4 + 2] = rgb[i * 3 + 2] ?? 0;
      out[i * 4 + 3] = 255;
    }
    return;
  }
  // PS3.3 C.11.2.1.2.1: y = ((x - (c - 0.5)) / (w - 1) + 0.5) * 255, clamped.
  const width = Math.max(1, window.width);
  const low = window.center - 0.5 - (width - 1) / 2;
  const scale = width > 1 ? 255 / (width - 1) : 0;
  const offset = window.center - 0.5;
  const invert = frame.photometric === 'MONOCHROME1';
  const values = frame.values;
  for (let i = 0; i < pixels; i += 1) {
    const x = values[i] ?? 0;
    let y = x <= low ? 0 : width <= 1 ? 255 : ((x - offset) * scale) + 127.5;
    if (y > 255) y = 255;
    if (invert) y = 255 - y;
    const o = i * 4;
    out[o] = y;
    out[o + 1] = y;
    out[o + 2] = y;
    out[o + 3] = 255;
  }
}

export type Preset = { key: string; name: string; window: Window | 'default' | 'auto' };

/** Window presets radiologists expect, by modality (keys 1-5). */
export function presetsFor(modality: string): Preset[] {
  if (modality === 'CT') {
    return [
      { key: '1', name: 'Default', window: 'default' },
      { key: '2', name: 'Brain', window: { center: 40, width: 80 } },
      { key: '3', name: 'Subdural', window: { center: 75, width: 215 } },
      { key: '4', name: 'Bone', window: { center: 600, width: 2800 } },
      { key: '5', name: 'Soft tissue', window: { center: 40, width: 400 } },
    ];
  }
  return [
    { key: '1', name: 'Default', window: 'default' },
    { key: '2', name: 'Full range', window: 'auto' },
  ];
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
