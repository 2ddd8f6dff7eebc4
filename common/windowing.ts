/**
 * The one windowing (VOI) definition of mia, shared by the server (rendered PNGs, thumbnails,
 * the raw endpoint's default window) and the renderer (the viewer's canvas and its presets), so
 * a preset or the automatic window draws the same pixels in both (issue 11: the CT bone preset
 * was 400/1800 on the server and 600/2800 in the renderer, and the auto windows differed).
 * Pure functions and constants: common/ imports nothing at run time.
 */

export type Window = { center: number; width: number };

/** A named window: `id` is stable (API, tests), `label` is what a reader sees. */
export type WindowPreset = Window & { id: string; label: string };

/**
 * CT presets in HU (W/L as in Radiopaedia's "windowing (CT)" table and most reading
 * workstations). Brain comes first: it is the CT default when the file carries no window.
 */
export const CT_WINDOW_PRESETS: readonly WindowPreset[] = [
  { id: 'brain', label: 'Brain', center: 40, width: 80 },
  { id: 'subdural', label: 'Subdural', center: 75, width: 215 },
  { id: 'lung', label: 'Lung', center: -600, width: 1500 },
  { id: 'bone', label: 'Bone', center: 400, width: 1800 },
  { id: 'soft-tissue', label: 'Soft tissue', center: 40, width: 400 },
];

/** Value at quantile q (0..1) of `values`, by sorting a sample (at most ~64k values). */
export function percentile(values: ArrayLike<number>, q: number): number {
  const step = Math.max(1, Math.floor(values.length / 65536));
  const sample = new Float64Array(Math.ceil(values.length / step));
  let n = 0;
  for (let i = 0; i < values.length; i += step) sample[n++] = values[i] ?? 0;
  if (n === 0) return 0;
  // A typed array sorts numerically and natively: the viewer computes this per slice.
  const sorted = sample.subarray(0, n).sort();
  const idx = Math.min(n - 1, Math.max(0, Math.round(q * (n - 1))));
  return sorted[idx] ?? 0;
}

/** Width 1, its lower edge half a unit above `value`: `value` and below are black, higher is white. */
export function flatWindow(value: number): Window {
  return { center: value + 1, width: 1 };
}

/**
 * The automatic window: the 1st to 99th percentile of the modality values, robust to a few hot
 * or cold pixels. A flat frame (an all-zero padding slice, a blank frame) has no contrast to
 * show: it gets a width-1 window just above its value, so it is drawn black like a blank film,
 * not white (PS3.3 C.11.2.1.2.1 maps a value at the centre of a width-1 window to the top).
 */
export function autoWindow(values: ArrayLike<number>): Window {
  const lo = percentile(values, 0.01);
  const hi = percentile(values, 0.99);
  if (hi === lo) return flatWindow(hi);
  return { center: (lo + hi) / 2, width: Math.max(1, hi - lo) };
}

/**
 * The one place that builds window options for an image: the file's own windows first
 * (PS3.3 C.11.2.1.2, values are in modality units), then the CT presets; MR and anything else
 * get the automatic window, since their units are arbitrary. The first option is the default.
 */
export function windowOptions(
  modality: string,
  fileWindows: { windowCenter: readonly number[]; windowWidth: readonly number[] },
  values: ArrayLike<number>,
): WindowPreset[] {
  const out: WindowPreset[] = [];
  fileWindows.windowCenter.forEach((center, i) => {
    const width = fileWindows.windowWidth[i] ?? fileWindows.windowWidth[0];
    const id = i === 0 ? 'file' : `file ${i + 1}`;
    if (width !== undefined && width >= 1) out.push({ id, label: i === 0 ? 'File' : `File ${i + 1}`, center, width });
  });
  if (modality === 'CT') out.push(...CT_WINDOW_PRESETS);
  else out.push({ id: 'auto', label: 'Auto', ...autoWindow(values) });
  return out;
}

/**
 * The linear VOI LUT function of PS3.3 C.11.2.1.2.1 to 8 bits, rounded half up:
 * x <= c - 0.5 - (w-1)/2 -> 0; x > c - 0.5 + (w-1)/2 -> 255; else ((x - (c-0.5)) / (w-1) + 0.5) * 255.
 * MONOCHROME1 (minimum is white, C.7.6.3.1.2) is inverted after windowing, where PS3.4 N.2.1.1
 * places it, as is the reader's invert. `channels` 4 writes grey RGBA (a canvas ImageData),
 * 1 writes one byte per value (a grey PNG); both sides call this, so their pixels are equal.
 */
export function windowInto(
  values: ArrayLike<number>,
  win: Window,
  out: Uint8Array | Uint8ClampedArray,
  options: { invert?: boolean; channels?: 1 | 4 } = {},
): void {
  const w = Math.max(win.width, 1);
  const c = win.center;
  const low = c - 0.5 - (w - 1) / 2;
  const high = c - 0.5 + (w - 1) / 2;
  const invert = options.invert === true;
  const channels = options.channels ?? 1;
  for (let i = 0; i < values.length; i++) {
    const x = values[i] ?? 0;
    let y: number;
    if (x <= low) y = 0;
    else if (x > high) y = 255;
    else y = Math.min(255, Math.max(0, Math.round(((x - (c - 0.5)) / (w - 1) + 0.5) * 255)));
    if (invert) y = 255 - y;
    if (channels === 1) out[i] = y;
    else {
      const o = i * 4;
      out[o] = y;
      out[o + 1] = y;
      out[o + 2] = y;
      out[o + 3] = 255;
    }
  }
}
