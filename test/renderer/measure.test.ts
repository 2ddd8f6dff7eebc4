import { describe, expect, it } from 'vitest';
import type { RawFrame } from '../../renderer/src/imaging/frame.ts';
import { describeMeasurement, lengthMm, measure, probeValue, roiStats } from '../../renderer/src/imaging/measure.ts';

/** 10 x 10 frame: value = column + 10 * row (so each pixel is identifiable). */
function ramp(): RawFrame {
  const values = new Float32Array(100).map((_, i) => i);
  return { rows: 10, columns: 10, samplesPerPixel: 1, values, photometric: 'MONOCHROME2', defaultWindow: null, min: 0, max: 99 };
}

describe('measure', () => {
  it('uses row spacing vertically and column spacing horizontally (Pixel Spacing is row\\column)', () => {
    expect(lengthMm([0, 0], [10, 0], [0.8, 0.5])).toBeCloseTo(5);
    expect(lengthMm([0, 0], [0, 10], [0.8, 0.5])).toBeCloseTo(8);
    expect(lengthMm([0, 0], [3, 4], [1, 1])).toBeCloseTo(5);
    expect(lengthMm([0, 0], [3, 4], null)).toBeNull();
    expect(lengthMm([0, 0], [3, 4], [0, 1])).toBeNull();
  });

  it('probes the pixel under the point and nothing outside', () => {
    expect(probeValue(ramp(), [3.9, 2.1])).toBe(23);
    expect(probeValue(ramp(), [10, 0])).toBeNull();
    expect(probeValue(ramp(), [-0.1, 0])).toBeNull();
  });

  it('takes pixels whose centres are inside; area is the drawn shape in mm²', () => {
    // Rectangle over columns 2..3, rows 1..2: values 12, 13, 22, 23.
    const rect = roiStats(ramp(), 'rectangle', [2, 1], [4, 3], [0.5, 2]);
    expect(rect.count).toBe(4);
    expect(rect.mean).toBeCloseTo(17.5);
    expect(rect.sd).toBeCloseTo(Math.sqrt((2 * 5.5 ** 2 + 2 * 4.5 ** 2) / 3));
    expect(rect.area_mm2).toBeCloseTo(2 * 2 * 0.5 * 2);
    // Corners given in any order.
    expect(roiStats(ramp(), 'rectangle', [4, 3], [2, 1], [0.5, 2]).mean).toBeCloseTo(17.5);
    const ellipse = roiStats(ramp(), 'ellipse', [0, 0], [10, 10], [1, 1]);
    expect(ellipse.area_mm2).toBeCloseTo(Math.PI * 25);
    // Symmetric ramp over a centred disc: the mean is the centre value.
    expect(ellipse.mean).toBeCloseTo(49.5);
    expect(ellipse.count).toBeGreaterThan(60);
    expect(ellipse.count).toBeLessThan(100);
  });

  it('describes each kind with its unit and says when spacing is missing', () => {
    const frame = ramp();
    const length = { kind: 'length' as const, unit: null, ...measure(frame, 'length', [[0, 0], [10, 0]], [0.8, 0.5]) };
    expect(describeMeasurement(length)).toBe('5.0 mm');
    const roi = { kind: 'ellipse' as const, unit: 'HU', ...measure(frame, 'ellipse', [[0, 0], [10, 10]], null) };
    expect(describeMeasurement(roi)).toMatch(/^area — \(no pixel spacing\) · mean 49\.5 ± \d+\.\d HU \(SD\)$/);
    const probe = { kind: 'probe' as const, unit: 'HU', ...measure(frame, 'probe', [[1.5, 0.5]], null) };
    expect(describeMeasurement(probe)).toBe('value 1.0 HU');
  });

  it('labels sizes from detector-plane spacing "mm (detector)" (Imager Pixel Spacing, PS3.3 10.7.1.1)', () => {
    const frame = ramp();
    const length = { kind: 'length' as const, unit: null, ...measure(frame, 'length', [[0, 0], [10, 0]], [0.5, 0.5]) };
    expect(describeMeasurement({ ...length, pixel_spacing_source: 'imager_pixel_spacing' })).toBe('5.0 mm (detector)');
    expect(describeMeasurement({ ...length, pixel_spacing_source: 'imager_corrected_by_magnification' })).toBe('5.0 mm (est. magnification)');
    expect(describeMeasurement({ ...length, pixel_spacing_source: 'calibrated' })).toBe('5.0 mm');
    const roi = { kind: 'rectangle' as const, unit: null, pixel_spacing_source: 'imager_pixel_spacing' as const, ...measure(frame, 'rectangle', [[0, 0], [2, 2]], [0.5, 0.5]) };
    expect(describeMeasurement(roi)).toMatch(/^area 1\.0 mm² \(detector\) · /);
  });
});
