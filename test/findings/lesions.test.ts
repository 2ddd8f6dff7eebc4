/** The one definition of "one lesion" (server/findings/lesions.ts): chains, neighbours only, same label, overlap. */
import { describe, expect, it } from 'vitest';
import type { FindingV11 } from '#server/api/schemas.ts';
import { groupLesions } from '#server/findings/lesions.ts';

let n = 0;
function finding(slice: number | null, x: number, options: Partial<FindingV11> = {}): FindingV11 {
  n += 1;
  return {
    id: `f${n}`,
    label: 'tumor_detected',
    confidence: 0.5,
    location: { x, y: 0, width: 10, height: 10 },
    instance_uid: `1.2.${slice ?? 0}`,
    frame: 0,
    review: null,
    place: slice === null ? null : { slice, slices: 10, position_mm: slice, width_mm: 5, height_mm: 8 },
    ...options,
  };
}

describe('groupLesions', () => {
  it('chains neighbouring slices whose boxes overlap, even when the ends do not overlap each other', () => {
    // 0..10, 8..18, 16..26: the first and last do not overlap, the chain holds them together.
    const [a, b, c] = [finding(3, 0), finding(4, 8), finding(5, 16)];
    const lesions = groupLesions([b!, a!, c!]);
    expect(lesions).toHaveLength(1);
    expect(lesions[0]).toMatchObject({ id: a!.id, finding_ids: [a!.id, b!.id, c!.id], first_slice: 3, last_slice: 5, largest_diameter_mm: 8 });
  });

  it('keeps apart: a gap of one slice, touching but not overlapping boxes, another label, and findings without a place', () => {
    const lesions = groupLesions([
      finding(3, 0),
      finding(5, 0),
      finding(4, 10),
      finding(4, 0, { label: 'infarct_detected' }),
      finding(null, 0),
    ]);
    expect(lesions).toHaveLength(5);
    expect(lesions.at(-1)).toMatchObject({ first_slice: null, last_slice: null, largest_diameter_mm: null });
  });

  it('gives the lesion accepted when one of its slices is accepted, rejected only when all are', () => {
    expect(groupLesions([finding(1, 0, { review: 'rejected' }), finding(2, 0, { review: 'accepted' })])[0]?.review).toBe('accepted');
    expect(groupLesions([finding(1, 0, { review: 'rejected' }), finding(2, 0, { review: 'rejected' })])[0]?.review).toBe('rejected');
    expect(groupLesions([finding(1, 0, { review: 'rejected' }), finding(2, 0)])[0]?.review).toBeNull();
  });
});
