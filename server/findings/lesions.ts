/**
 * One lesion, one finding (issue 11). The model boxes each slice on its own, so one tumour over
 * five slices comes back as five findings. Findings are one lesion when they have the same label,
 * lie on neighbouring slices of the viewer's stack (slice numbers 1 apart) and their boxes
 * overlap in the image plane; the relation is closed transitively (slices 4-5-6 chain). This is
 * the only definition: the results and report APIs carry the groups, clients only show them.
 */
import type { FindingV11, Lesion } from '#server/api/schemas.ts';

function overlaps(a: FindingV11['location'], b: FindingV11['location']): boolean {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

function sameLesion(a: FindingV11, b: FindingV11): boolean {
  if (a.label !== b.label || !a.place || !b.place) return false;
  return Math.abs(a.place.slice - b.place.slice) === 1 && overlaps(a.location, b.location);
}

/**
 * A lesion's verdict: accepted when the reader accepted any of its slices (the lesion is real),
 * rejected when every slice was rejected, otherwise not reviewed.
 */
function lesionReview(members: readonly FindingV11[]): Lesion['review'] {
  if (members.some((f) => f.review === 'accepted')) return 'accepted';
  return members.every((f) => f.review === 'rejected') ? 'rejected' : null;
}

/** Every finding belongs to exactly one lesion; lesions come in the findings' order of first member. */
export function groupLesions(all: readonly FindingV11[]): Lesion[] {
  // A finding about a whole image (a slice classifier's) has no extent: as a lesion it would
  // claim the image's width as its diameter.
  const findings = all.some((f) => f.localization === 'image') ? all.filter((f) => f.localization !== 'image') : all;
  // Most results have no finding or one: a page of them should not build the structures below for nothing.
  if (findings.length === 0) return [];
  if (findings.length === 1) return findings.map((f) => lesionOf([f]));
  const parent = findings.map((_, i) => i);
  const root = (i: number): number => {
    let r = i;
    while (parent[r] !== r) r = parent[r] ?? r;
    return r;
  };
  for (let i = 0; i < findings.length; i += 1) {
    for (let j = i + 1; j < findings.length; j += 1) {
      const a = findings[i];
      const b = findings[j];
      if (a && b && sameLesion(a, b)) parent[root(j)] = root(i);
    }
  }
  const groups = new Map<number, FindingV11[]>();
  findings.forEach((finding, i) => {
    const key = root(i);
    groups.set(key, [...(groups.get(key) ?? []), finding]);
  });
  return [...groups.values()].map(lesionOf);
}

function lesionOf(members: readonly FindingV11[]): Lesion {
  // One pass, no copies: an export builds a lesion for each of a million findings.
  const bySlice = members.length === 1 ? members : [...members].sort((a, b) => (a.place?.slice ?? 0) - (b.place?.slice ?? 0));
  let firstSlice: number | null = null;
  let lastSlice: number | null = null;
  let largest: number | null = null;
  let spacingSource: Lesion['spacing_source'];
  let confidence = -Infinity;
  for (const f of bySlice) {
    const place = f.place;
    if (place) {
      firstSlice = firstSlice === null ? place.slice : Math.min(firstSlice, place.slice);
      lastSlice = lastSlice === null ? place.slice : Math.max(lastSlice, place.slice);
      if (place.width_mm != null && place.height_mm != null) largest = Math.max(largest ?? -Infinity, place.width_mm, place.height_mm);
      spacingSource ??= place.spacing_source;
    }
    confidence = Math.max(confidence, f.confidence);
  }
  const first = bySlice[0];
  return {
    id: first?.id ?? '',
    label: first?.label ?? '',
    finding_ids: bySlice.map((f) => f.id),
    first_slice: firstSlice,
    last_slice: lastSlice,
    slices: first?.place?.slices ?? null,
    largest_diameter_mm: largest,
    // The spacing source of a lesion's sizes: its findings', when they say (all are on one series).
    ...(spacingSource === undefined ? {} : { spacing_source: spacingSource }),
    confidence,
    review: lesionReview(members),
  };
}
