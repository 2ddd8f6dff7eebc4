/**
 * A series as the stack the viewer scrolls: instances in the server's slice order, each
 * multi-frame instance's frames in the order of their own positions. Enhanced multi-frame images
 * keep position, spacing and rescale per frame (functional groups, PS3.3 C.7.6.16), and their
 * frame numbers need not follow space (an interleaved acquisition stores even slices first).
 */
import type { Instance } from '../api/types.ts';

export type Slice = { instance: Instance; frame: number };

export function stackOf(instances: readonly Instance[]): Slice[] {
  return instances.flatMap((instance) => {
    const frames = Array.from({ length: Math.max(1, instance.frames) }, (_, frame) => ({ instance, frame }));
    const values = instance.frame_values;
    if (!values || values.length !== frames.length || values.some((v) => v.position === null)) return frames;
    // Same direction as the server's instance order: ascending position along the slice normal.
    return frames.sort((a, b) => (values[a.frame]?.position ?? 0) - (values[b.frame]?.position ?? 0));
  });
}

/** The slice's own Pixel Spacing [row, column] in mm: its frame's where the API lists frames. */
export function sliceSpacing(slice: Slice | null): readonly number[] | null {
  if (!slice) return null;
  return slice.instance.frame_values?.[slice.frame]?.pixel_spacing ?? slice.instance.pixel_spacing;
}

/**
 * The slice's Image Orientation (Patient): its frame's own for Enhanced multi-frame images whose
 * frames lie in different planes, else the instance's. Orientation markers read it per slice.
 */
export function sliceOrientation(slice: Slice | null): readonly number[] | null {
  if (!slice) return null;
  return slice.instance.frame_values?.[slice.frame]?.image_orientation ?? slice.instance.image_orientation ?? null;
}
