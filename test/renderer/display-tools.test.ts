/**
 * The viewer's display tools without a browser: patient direction letters from Image
 * Orientation (Patient) (PS3.3 C.7.6.2.1.1) under rotate and flip, and the scale bar's length.
 */
import { describe, expect, it } from 'vitest';
import { directionLetters, edgeMarkers, flipHorizontal, flipVertical, IDENTITY, isTurned, rotateClockwise, scaleBar, screenDeltaToFrame, screenPointToFrame } from '../../renderer/src/imaging/display-tools.ts';

const AXIAL = [1, 0, 0, 0, 1, 0];
const CORONAL = [1, 0, 0, 0, 0, -1];
const SAGITTAL = [0, 1, 0, 0, 0, -1];

describe('orientation markers', () => {
  it('reads the standard planes as radiologists hang them', () => {
    expect(edgeMarkers(AXIAL)).toEqual({ left: 'R', right: 'L', top: 'A', bottom: 'P' });
    expect(edgeMarkers(CORONAL)).toEqual({ left: 'R', right: 'L', top: 'H', bottom: 'F' });
    expect(edgeMarkers(SAGITTAL)).toEqual({ left: 'A', right: 'P', top: 'H', bottom: 'F' });
  });

  it('gives oblique directions two letters, the strongest first, and nothing for a missing orientation', () => {
    expect(directionLetters([0.8, 0, 0.6])).toBe('LH');
    expect(directionLetters([-0.6, 0.8, 0])).toBe('PR');
    expect(directionLetters([0.99, 0.1, 0])).toBe('L');
    expect(edgeMarkers(null)).toBeNull();
    expect(edgeMarkers([0, 0, 0, 0, 0, 0])).toBeNull();
  });

  it('turns and mirrors with the image; four quarter turns or two mirrors are the identity', () => {
    const turned = rotateClockwise(IDENTITY);
    expect(isTurned(turned)).toBe(true);
    expect(edgeMarkers(AXIAL, turned)).toEqual({ left: 'P', right: 'A', top: 'R', bottom: 'L' });
    expect(edgeMarkers(AXIAL, flipHorizontal(IDENTITY))).toEqual({ left: 'L', right: 'R', top: 'A', bottom: 'P' });
    expect(edgeMarkers(AXIAL, flipVertical(IDENTITY))).toEqual({ left: 'R', right: 'L', top: 'P', bottom: 'A' });
    // A screen mirror after a turn still swaps the screen's left and right.
    expect(edgeMarkers(AXIAL, flipHorizontal(turned))).toEqual({ left: 'A', right: 'P', top: 'R', bottom: 'L' });
    expect(rotateClockwise(rotateClockwise(rotateClockwise(turned)))).toEqual(IDENTITY);
    expect(flipVertical(flipVertical(IDENTITY))).toEqual(IDENTITY);
    expect(flipVertical(flipHorizontal(IDENTITY))).toEqual(rotateClockwise(turned));
  });
});

describe('scale bar', () => {
  it('is a round length about a quarter of the width, drawn at pixels per mm', () => {
    // 0.5 mm pixels drawn 4 screen px wide: 8 px per mm; 800 px wide -> about 25 mm -> 2 cm.
    expect(scaleBar(8, 800)).toEqual({ mm: 20, pixels: 160, label: '2 cm' });
    expect(scaleBar(100, 800)).toEqual({ mm: 2, pixels: 200, label: '2 mm' });
    expect(scaleBar(1, 2000)).toEqual({ mm: 500, pixels: 500, label: '50 cm' });
    expect(scaleBar(Number.NaN, 800)).toBeNull();
    // At the detector (a radiograph's Imager Pixel Spacing) the bar says so, as the measurements do.
    expect(scaleBar(8, 800, 'imager_pixel_spacing')).toEqual({ mm: 20, pixels: 160, label: '2 cm (detector)' });
    expect(scaleBar(8, 800, 'imager_corrected_by_magnification')?.label).toBe('2 cm (est. magnification)');
    expect(scaleBar(8, 800, 'calibrated')?.label).toBe('2 cm');
  });
});

describe('pointer mapping under a turn', () => {
  it('maps a screen drag and a canvas point into the unrotated frame', () => {
    const turned = rotateClockwise(IDENTITY);
    // Turned clockwise, a drag to the right on screen moves the image up in its own frame.
    expect(screenDeltaToFrame(turned, 10, 0)).toEqual({ x: 0, y: -10 });
    expect(screenDeltaToFrame(flipHorizontal(IDENTITY), 10, 5)).toEqual({ x: -10, y: 5 });
    // A 400 x 200 canvas turned: the frame is 200 x 400; the canvas's top-right corner is the frame's top-left.
    expect(screenPointToFrame(turned, { width: 400, height: 200 }, 400, 0)).toEqual({ x: 0, y: 0 });
    expect(screenPointToFrame(IDENTITY, { width: 400, height: 200 }, 30, 40)).toEqual({ x: 30, y: 40 });
  });
});
