/**
 * Synchronized scrolling by position (issue 11, study-level reading): the geometry behind it as
 * pure functions, so it is testable without a browser.
 *
 * Every slice has a position along its own slice normal (Image Position (Patient) projected on
 * row x column of Image Orientation (Patient), PS3.3 C.7.6.2.1.1; the server gives it per
 * instance and, for Enhanced multi-frame images, per frame). Two stacks can follow each other
 * only when their planes are parallel: then a point's position along one normal is +- its
 * position along the other. Non-parallel planes (an axial and a sagittal series) cut each other
 * in a line, not a slice, so there is no "same slice" to scroll to and they are not synced.
 *
 * Stacks of one frame of reference (here: one study, as the instance list does not carry
 * Frame of Reference UID) share patient coordinates, so the nearest slice by absolute position
 * is the same anatomy. A prior study was acquired with the patient placed anew: its coordinates
 * are not comparable, so the pair is linked with the offset that holds at the moment the reader
 * links them (what Horos and OHIF do), after aligning them by eye.
 */

export type Vector3 = readonly [number, number, number];

/** The slice normal (row x column) of Image Orientation (Patient), unit length; null when absent or degenerate. */
export function sliceNormal(orientation: readonly number[] | null | undefined): Vector3 | null {
  if (!orientation || orientation.length !== 6 || orientation.some((x) => !Number.isFinite(x))) return null;
  const [a, b, c, d, e, f] = orientation as [number, number, number, number, number, number];
  const n: [number, number, number] = [b * f - c * e, c * d - a * f, a * e - b * d];
  const length = Math.hypot(n[0], n[1], n[2]);
  if (length < 1e-6) return null;
  return [n[0] / length, n[1] / length, n[2] / length];
}

/**
 * Planes within this angle count as parallel: scanners write direction cosines to a few decimals,
 * and a gantry tilt of a degree or two between a study and its prior still shows the same
 * anatomy slice by slice.
 */
export const PARALLEL_TOLERANCE_DEG = 5;

export type Parallel = { parallel: true; sign: 1 | -1 } | { parallel: false; angleDeg: number };

/**
 * Whether two planes are parallel, and whether their normals point the same way (sign 1) or
 * opposite ways (-1: one stack's positions count the other way along the same axis).
 */
export function parallelPlanes(a: Vector3, b: Vector3, toleranceDeg = PARALLEL_TOLERANCE_DEG): Parallel {
  const dot = a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
  const angleDeg = (Math.acos(Math.min(1, Math.abs(dot))) * 180) / Math.PI;
  if (angleDeg <= toleranceDeg) return { parallel: true, sign: dot >= 0 ? 1 : -1 };
  return { parallel: false, angleDeg };
}

/** The slice whose position is nearest to `target` (positions in the same axis), or -1 without positions. */
export function nearestSlice(positions: readonly (number | null)[], target: number): number {
  let best = -1;
  let distance = Infinity;
  for (let i = 0; i < positions.length; i += 1) {
    const p = positions[i];
    if (p === null || p === undefined || !Number.isFinite(p)) continue;
    const d = Math.abs(p - target);
    // Ties go to the lower index, so the choice does not flicker between two equidistant slices.
    if (d < distance) {
      distance = d;
      best = i;
    }
  }
  return best;
}

/** One stack as sync sees it: the plane's normal and each slice's position along it. */
export type StackGeometry = { normal: Vector3 | null; positions: readonly (number | null)[]; studyUid: string };

/**
 * How a pane follows the reference pane: absolute positions (same frame of reference), a kept
 * offset in mm (a prior), or not at all, with the reason the reader sees.
 */
export type Link = { mode: 'absolute'; sign: 1 | -1 } | { mode: 'offset'; sign: 1 | -1; offsetMm: number } | { mode: 'none'; why: string };

/**
 * Links `pane` to `reference`, both showing slice `paneIndex` / `referenceIndex` now. Positions
 * are compared in the reference's axis: a pane position p is `sign * p` there. For a prior the
 * offset is what holds now: pane position (in the reference axis) minus reference position.
 */
export function linkPanes(reference: StackGeometry, referenceIndex: number, pane: StackGeometry, paneIndex: number): Link {
  if (!reference.normal || !pane.normal) return { mode: 'none', why: 'Not synced: no Image Orientation (Patient) to compare the planes by.' };
  if (!reference.positions.some((p) => p !== null) || !pane.positions.some((p) => p !== null)) {
    return { mode: 'none', why: 'Not synced: the slices carry no Image Position (Patient).' };
  }
  const parallel = parallelPlanes(reference.normal, pane.normal);
  if (!parallel.parallel) {
    return {
      mode: 'none',
      why: `Not synced: the planes are not parallel (${Math.round(parallel.angleDeg)}° apart), so no slice of one matches a slice of the other.`,
    };
  }
  if (pane.studyUid === reference.studyUid) return { mode: 'absolute', sign: parallel.sign };
  const r = reference.positions[referenceIndex];
  const p = pane.positions[paneIndex];
  if (r === null || r === undefined || p === null || p === undefined) return { mode: 'none', why: 'Not synced: the slice shown has no position.' };
  return { mode: 'offset', sign: parallel.sign, offsetMm: parallel.sign * p - r };
}

/** The pane slice that goes with reference position `referenceMm`, or null when unlinked. */
export function followReference(link: Link, pane: StackGeometry, referenceMm: number): number | null {
  if (link.mode === 'none') return null;
  const offset = link.mode === 'offset' ? link.offsetMm : 0;
  // Pane positions in the reference axis are sign * p; the wanted one is referenceMm + offset.
  const at = nearestSlice(pane.positions, link.sign * (referenceMm + offset));
  return at >= 0 ? at : null;
}

/** The reference position that pane slice `paneIndex` stands for (the inverse of followReference). */
export function referenceOf(link: Link, pane: StackGeometry, paneIndex: number): number | null {
  if (link.mode === 'none') return null;
  const p = pane.positions[paneIndex];
  if (p === null || p === undefined) return null;
  const offset = link.mode === 'offset' ? link.offsetMm : 0;
  return link.sign * p - offset;
}

/** What the pane says about its link, for the status line under its corner text. */
export function linkText(link: Link): string {
  if (link.mode === 'none') return link.why;
  if (link.mode === 'absolute') return 'Synced by position (same study)';
  const mm = link.offsetMm;
  return `Synced with a kept offset of ${mm >= 0 ? '+' : ''}${mm.toFixed(1)} mm (other study: positions are not comparable)`;
}
