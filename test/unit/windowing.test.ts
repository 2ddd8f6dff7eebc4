/**
 * One windowing definition (issue 11): the server's rendering (windowOptions, windowTo8Bit) and
 * the renderer's canvas (presetsFor, autoWindow, renderFrame) use common/windowing.ts, so each
 * preset and the automatic window give the same window and the same 8-bit pixels on both sides.
 */
import { describe, expect, it } from 'vitest';
import { autoWindow as sharedAutoWindow, CT_WINDOW_PRESETS, windowInto } from '#common/windowing.ts';
import { applyRescale, windowOptions, windowTo8Bit } from '#server/dicom/modality.ts';
import { autoWindow, presetsFor, renderFrame, type RawFrame } from '../../renderer/src/imaging/frame.ts';
import { seededRandom } from '../helpers/random.ts';

/** A CT-like frame: stored values 0..4095 with intercept -1024 (HU -1024..3071), some noise. */
function ctStored(n: number): Int16Array {
  const random = seededRandom(11);
  return Int16Array.from({ length: n }, (_, i) => Math.max(0, Math.min(4095, Math.round((i * 4096) / n + (random() - 0.5) * 40))));
}

function rendererFrame(values: Float32Array, photometric = 'MONOCHROME2'): RawFrame {
  return { rows: 1, columns: values.length, samplesPerPixel: 1, values, photometric, defaultWindow: null, min: Math.min(...values), max: Math.max(...values) };
}

function greyOf(rgba: Uint8ClampedArray): number[] {
  return [...rgba].filter((_, i) => i % 4 === 0);
}

describe('shared windowing', () => {
  it('has one set of CT presets, bone 400/1800, on the server and in the renderer', () => {
    const server = windowOptions('CT', { windowCenter: [], windowWidth: [] }, []);
    const renderer = presetsFor('CT').filter((p) => typeof p.window === 'object');
    expect(server.map((w) => ({ center: w.center, width: w.width }))).toEqual(renderer.map((p) => p.window));
    expect(renderer.map((p) => p.name)).toEqual(CT_WINDOW_PRESETS.map((p) => p.label));
    expect(server.find((w) => w.id === 'bone')).toMatchObject({ center: 400, width: 1800 });
    // Keys 2.. follow Default (1), in the order of the shared list.
    expect(presetsFor('CT').map((p) => p.key)).toEqual(['1', '2', '3', '4', '5', '6']);
  });

  it('draws each CT preset to the same 8-bit pixels on both sides', () => {
    const stored = ctStored(8192);
    const hu = applyRescale(stored, 1, -1024);
    const frame = rendererFrame(Float32Array.from(stored, (v) => v - 1024));
    for (const preset of CT_WINDOW_PRESETS) {
      const server = [...windowTo8Bit(hu, preset)];
      const out = new Uint8ClampedArray(stored.length * 4);
      renderFrame(frame, preset, out);
      expect(greyOf(out), preset.id).toEqual(server);
      // Not trivially equal: each preset spreads its integer HU over the grey scale on this ramp.
      expect(new Set(server).size, preset.id).toBeGreaterThan(Math.min(200, preset.width / 2));
    }
  });

  it('uses the same automatic window (1st-99th percentile) and the same MONOCHROME1 inversion', () => {
    const random = seededRandom(7);
    const values = Float32Array.from({ length: 20000 }, () => random() * 900 + (random() < 0.001 ? 30000 : 0));
    const [server] = windowOptions('MR', { windowCenter: [], windowWidth: [] }, values);
    const frame = rendererFrame(values, 'MONOCHROME1');
    expect({ center: server!.center, width: server!.width }).toEqual(autoWindow(frame));
    // A few hot pixels do not set the window: it spans about 9..891, not the hot 30000.
    expect(server!.width).toBeLessThan(1000);
    const out = new Uint8ClampedArray(values.length * 4);
    renderFrame(frame, autoWindow(frame), out);
    expect(greyOf(out)).toEqual([...windowTo8Bit(values, server!, { invert: true })]);
  });

  it('is the linear VOI function of PS3.3 C.11.2.1.2.1', () => {
    const out = new Uint8Array(5);
    windowInto([-1000, -0.5, 39.5, 79.5, 80], { center: 40, width: 80 }, out);
    expect([...out]).toEqual([0, 0, 128, 255, 255]);
    const rgba = new Uint8ClampedArray(8);
    windowInto([9, 10], { center: 10, width: 1 }, rgba, { channels: 4, invert: true });
    expect([...rgba]).toEqual([255, 255, 255, 255, 0, 0, 0, 255]);
    expect(sharedAutoWindow(new Float32Array(16))).toEqual({ center: 1, width: 1 });
  });
});

describe('invert in the renderer', () => {
  it("inverts grey after the window (on top of MONOCHROME1) and colour per channel", () => {
    const grey = rendererFrame(Float32Array.from([0, 100]));
    const out = new Uint8ClampedArray(8);
    renderFrame(grey, { center: 50, width: 100 }, out, { invert: true });
    expect([out[0], out[4]]).toEqual([255, 0]);
    renderFrame({ ...grey, photometric: 'MONOCHROME1' }, { center: 50, width: 100 }, out, { invert: true });
    expect([out[0], out[4]]).toEqual([0, 255]);
    const colour: RawFrame = { rows: 1, columns: 1, samplesPerPixel: 3, values: Uint8Array.from([10, 200, 255]), photometric: 'RGB', defaultWindow: null, min: 0, max: 255 };
    const rgba = new Uint8ClampedArray(4);
    renderFrame(colour, { center: 128, width: 256 }, rgba, { invert: true });
    expect([...rgba]).toEqual([245, 55, 0, 255]);
  });
});
