/**
 * Findings and lesions in the reader's words: slices and millimetres, as the server measured them
 * (server/findings/places.ts, lesions.ts). A size is never guessed from pixels: without Pixel
 * Spacing it says so.
 */
import type { FindingPlace, Lesion } from './api/types.ts';
import { mmUnit } from '../../common/pixel-spacing.ts';

export function slicesText(first: number | null, last: number | null, slices: number | null): string {
  if (first === null || last === null) return 'slice unknown';
  const of = slices === null ? '' : ` of ${slices}`;
  return first === last ? `slice ${first}${of}` : `slices ${first}–${last}${of}`;
}

/** "24 × 15 mm" for a box; the width runs along the row. */
export function boxSizeText(place: FindingPlace | null | undefined): string {
  if (!place || place.width_mm === null || place.height_mm === null) return 'size unknown (no pixel spacing)';
  return `${place.width_mm} × ${place.height_mm} ${mmUnit(place.spacing_source)}`;
}

export function lesionSizeText(lesion: Lesion, places: ReadonlyMap<string, FindingPlace | null | undefined>): string {
  if (lesion.finding_ids.length === 1) return boxSizeText(places.get(lesion.finding_ids[0] ?? ''));
  return lesion.largest_diameter_mm === null ? 'size unknown (no pixel spacing)' : `largest diameter ${lesion.largest_diameter_mm} ${mmUnit(lesion.spacing_source)}`;
}

export function lesionText(lesion: Lesion, places: ReadonlyMap<string, FindingPlace | null | undefined>): string {
  return `${lesionSizeText(lesion, places)}, ${slicesText(lesion.first_slice, lesion.last_slice, lesion.slices)}`;
}

export type LesionRow<F extends { id: string }> = { finding: F; lesion: Lesion | null; first: boolean };

/**
 * The viewer's list, one lesion together: findings keep their order (by confidence) except that
 * the other slices of a lesion follow its first listed finding, by slice. `lesion` is set only
 * for lesions of more than one finding.
 */
export function lesionRows<F extends { id: string }>(findings: readonly F[], lesions: readonly Lesion[]): Array<LesionRow<F>> {
  const lesionOf = new Map(lesions.filter((l) => l.finding_ids.length > 1).flatMap((l) => l.finding_ids.map((id) => [id, l] as const)));
  const byId = new Map(findings.map((f) => [f.id, f]));
  const placed = new Set<string>();
  const rows: Array<LesionRow<F>> = [];
  for (const finding of findings) {
    if (placed.has(finding.id)) continue;
    const lesion = lesionOf.get(finding.id) ?? null;
    const members = lesion ? lesion.finding_ids.flatMap((id) => byId.get(id) ?? []) : [finding];
    members.forEach((member, index) => {
      placed.add(member.id);
      rows.push({ finding: member, lesion, first: index === 0 });
    });
  }
  return rows;
}
