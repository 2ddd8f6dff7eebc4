/**
 * The shape of a pixel, shared by the server (thumbnails) and the renderer (the viewer) so both
 * draw an image by its physical aspect. A pure function: common/ imports nothing at run time.
 */

/**
 * The height of one pixel over its width, from Pixel Spacing [row spacing, column spacing] in mm
 * (PS3.3 10.7.1.3): 0.94\0.47 is a pixel twice as tall as wide, so the image is drawn by its
 * physical aspect, not square (issue 11). 1 when the spacing is missing or not believable.
 */
export function pixelAspect(spacing: readonly number[] | null | undefined): number {
  const [row, column] = spacing ?? [];
  if (row === undefined || column === undefined || !(row > 0) || !(column > 0)) return 1;
  const aspect = row / column;
  // A ratio beyond 1:10 is a broken header, not a pixel shape: drawing by it would hide the image.
  return aspect >= 0.1 && aspect <= 10 ? aspect : 1;
}
