/** The viewer's stack: frames of an Enhanced multi-frame instance in the order of their positions. */
import { describe, expect, it } from 'vitest';
import type { FrameValue, Instance } from '../../renderer/src/api/types.ts';
import { sliceSpacing, stackOf } from '../../renderer/src/imaging/stack.ts';

const frame = (position: number | null, spacing: number[] | null = [0.5, 0.5]): FrameValue => ({
  position,
  image_position: position === null ? null : [0, 0, position],
  pixel_spacing: spacing,
  rescale_slope: 1,
  rescale_intercept: -1024,
  window_center: 40,
  window_width: 80,
});

const instance = (uid: string, frames: number, frameValues: FrameValue[] | null = null): Instance => ({
  instance_uid: uid,
  instance_number: 1,
  position: frameValues?.[0]?.position ?? null,
  rows: 4,
  columns: 4,
  frames,
  transfer_syntax: '1.2.840.10008.1.2.1',
  pixel_spacing: [1, 1],
  photometric: 'MONOCHROME2',
  rescale_slope: 1,
  rescale_intercept: -1024,
  window_center: 40,
  window_width: 80,
  frame_values: frameValues,
});

describe('stackOf', () => {
  it('orders an interleaved Enhanced instance\'s frames by their own positions', () => {
    const enhanced = instance('e', 6, [0, 10, 20, 5, 15, 25].map((z) => frame(z)));
    expect(stackOf([enhanced]).map((s) => s.frame)).toEqual([0, 3, 1, 4, 2, 5]);
  });

  it('keeps frame order for classic multi-frame images and when a frame has no position', () => {
    expect(stackOf([instance('a', 3)]).map((s) => s.frame)).toEqual([0, 1, 2]);
    expect(stackOf([instance('b', 3, [frame(9), frame(null), frame(1)])]).map((s) => s.frame)).toEqual([0, 1, 2]);
    expect(stackOf([instance('c', 1), instance('d', 2)]).map((s) => `${s.instance.instance_uid}${s.frame}`)).toEqual(['c0', 'd0', 'd1']);
  });

  it('gives each slice its frame\'s pixel spacing, else the instance\'s', () => {
    const enhanced = instance('e', 2, [frame(0, [0.94, 0.47]), frame(1, null)]);
    const [first, second] = stackOf([enhanced]);
    expect(sliceSpacing(first!)).toEqual([0.94, 0.47]);
    expect(sliceSpacing(second!)).toEqual([1, 1]);
    expect(sliceSpacing(null)).toBeNull();
  });
});
