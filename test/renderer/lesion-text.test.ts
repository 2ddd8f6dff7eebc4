/** Sizes in the reader's words say where they were measured: "mm (detector)" from Imager Pixel Spacing. */
import { describe, expect, it } from 'vitest';
import { boxSizeText, lesionSizeText } from '../../renderer/src/lesion-text.ts';

const place = { slice: 1, slices: 1, position_mm: null, width_mm: 6, height_mm: 4 };

describe('lesion sizes', () => {
  it('labels sizes from detector-plane spacing, and no others', () => {
    expect(boxSizeText(place)).toBe('6 × 4 mm');
    expect(boxSizeText({ ...place, spacing_source: 'pixel_spacing' })).toBe('6 × 4 mm');
    expect(boxSizeText({ ...place, spacing_source: 'imager_pixel_spacing' })).toBe('6 × 4 mm (detector)');
    expect(boxSizeText({ ...place, width_mm: null })).toBe('size unknown (no pixel spacing)');
    const lesion = {
      id: 'f1',
      label: 'tumor_detected',
      finding_ids: ['f1', 'f2'],
      first_slice: 1,
      last_slice: 2,
      slices: 2,
      largest_diameter_mm: 6,
      confidence: 0.9,
      review: null,
      spacing_source: 'imager_pixel_spacing' as const,
    };
    expect(lesionSizeText(lesion, new Map())).toBe('largest diameter 6 mm (detector)');
  });
});
