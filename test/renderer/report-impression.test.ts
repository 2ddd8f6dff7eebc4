/** The suggested impression says a classifier's finding is about a whole image, not a lesion with a size. */
import { describe, expect, it } from 'vitest';
import type { Finding, Lesion } from '../../renderer/src/api/types.ts';
import { impressionFromLesions } from '../../renderer/src/report-text.ts';

const finding = (over: Partial<Finding>): Finding => ({
  id: 'f1',
  label: 'lesion_present',
  confidence: 0.87,
  location: { x: 0, y: 0, width: 128, height: 128 },
  instance_uid: '1.2.3',
  frame: 0,
  review: 'accepted',
  place: { slice: 12, slices: 30, position_mm: null, width_mm: null, height_mm: null },
  localization: 'image',
  ...over,
});
const names = { displayName: (label: string) => (label === 'lesion_present' ? 'Lesion present' : 'Mass'), model: 'example v0.1.0' };

describe('impression with whole-image findings', () => {
  it('names an accepted whole-image finding with its slice and no size, beside box lesions', () => {
    const lesion: Lesion = { id: 'f2', label: 'tumor_detected', finding_ids: ['f2'], first_slice: 3, last_slice: 3, slices: 30, largest_diameter_mm: 12, confidence: 0.9, review: 'accepted' };
    const box = finding({ id: 'f2', label: 'tumor_detected', localization: 'box', location: { x: 1, y: 2, width: 10, height: 12 }, place: { slice: 3, slices: 30, position_mm: null, width_mm: 10, height_mm: 12 } });
    expect(impressionFromLesions([lesion], [finding({}), box], names)).toBe(
      'AI findings accepted on review (example v0.1.0, not for clinical use):\n' +
        '- Mass: 10 × 12 mm, slice 3 of 30 (AI confidence 90%).\n' +
        '- Lesion present: whole-image finding on slice 12 of 30, no location given (AI confidence 87%).',
    );
  });

  it('offers nothing while the whole-image finding is not accepted', () => {
    expect(impressionFromLesions([], [finding({ review: null })], names)).toBeNull();
    expect(impressionFromLesions([], [finding({ review: 'rejected' })], names)).toBeNull();
  });
});
