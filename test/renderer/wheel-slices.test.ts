/**
 * Slices a wheel event moves a stack (renderer/src/imaging/wheel-slices.ts): one per notch, so
 * notches Chromium coalesced into one event while the renderer was busy are not lost, and a
 * touchpad's small deltas still move a slice each.
 */
import { describe, expect, it } from 'vitest';
import { wheelSlices } from '../../renderer/src/imaging/wheel-slices.ts';

const PIXEL = 0;
const LINE = 1;
const PAGE = 2;

describe('wheel slices', () => {
  it('moves one slice a notch, in the wheel direction', () => {
    expect(wheelSlices({ deltaY: 100, deltaMode: PIXEL })).toBe(1);
    expect(wheelSlices({ deltaY: -100, deltaMode: PIXEL })).toBe(-1);
    expect(wheelSlices({ deltaY: 3, deltaMode: LINE })).toBe(1);
    expect(wheelSlices({ deltaY: -1, deltaMode: PAGE })).toBe(-1);
  });

  it('keeps every notch of events coalesced into one', () => {
    expect(wheelSlices({ deltaY: 200, deltaMode: PIXEL })).toBe(2);
    expect(wheelSlices({ deltaY: -400, deltaMode: PIXEL })).toBe(-4);
    expect(wheelSlices({ deltaY: 9, deltaMode: LINE })).toBe(3);
  });

  it('moves one slice for a touchpad delta or a notch scaled by the display, none for no movement', () => {
    expect(wheelSlices({ deltaY: 4, deltaMode: PIXEL })).toBe(1);
    expect(wheelSlices({ deltaY: -0.5, deltaMode: PIXEL })).toBe(-1);
    expect(wheelSlices({ deltaY: 150, deltaMode: PIXEL })).toBe(1);
    expect(wheelSlices({ deltaY: 0, deltaMode: PIXEL })).toBe(0);
    expect(wheelSlices({ deltaY: Number.NaN, deltaMode: PIXEL })).toBe(0);
  });

  it('caps a runaway delta', () => {
    expect(wheelSlices({ deltaY: 1e9, deltaMode: PIXEL })).toBe(50);
  });
});
