/**
 * Where a pixel spacing in mm comes from, decided once (server import) and shown wherever a size
 * in mm is (measurements, report, scale bar). Projection radiographs (CR, DX, MG) carry Imager
 * Pixel Spacing (0018,1164), measured at the detector's front plane: the beam diverges, so an
 * object in the patient is drawn larger there than it is (geometric magnification). PS3.3
 * 10.7.1.1: Pixel Spacing (0028,0030) is in the patient; when it equals Imager Pixel Spacing the
 * image was not calibrated (it is still the detector's spacing), when it differs it was corrected
 * or calibrated against an object of known size (Pixel Spacing Calibration Type (0028,0A02),
 * 10.7.1.2, says how). The Estimated Radiographic Magnification Factor (0018,1114) divides the
 * detector spacing into an estimate at the patient (PS3.3 C.8.11.7). A pure module: common/
 * imports nothing at run time.
 */

export const PIXEL_SPACING_SOURCES = ['pixel_spacing', 'imager_pixel_spacing', 'imager_corrected_by_magnification', 'calibrated'] as const;
export type PixelSpacingSource = (typeof PIXEL_SPACING_SOURCES)[number];

export type SpacingTags = {
  /** Pixel Spacing (0028,0030), [row, column] mm. */
  pixelSpacing: readonly number[] | null;
  /** Imager Pixel Spacing (0018,1164), [row, column] mm. */
  imagerPixelSpacing: readonly number[] | null;
  /** Estimated Radiographic Magnification Factor (0018,1114). */
  magnification: number | null;
  /** Pixel Spacing Calibration Type (0028,0A02): GEOMETRY or FIDUCIAL. */
  calibrationType: string | null;
};

const pair = (v: readonly number[] | null): [number, number] | null => {
  const [row, column] = v ?? [];
  return row !== undefined && column !== undefined && row > 0 && column > 0 && v?.length === 2 ? [row, column] : null;
};

// DS values are decimal strings: the same spacing written twice may differ in its last digit.
const same = (a: readonly [number, number], b: readonly [number, number]): boolean =>
  Math.abs(a[0] - b[0]) <= 1e-6 * Math.max(1, a[0]) && Math.abs(a[1] - b[1]) <= 1e-6 * Math.max(1, a[1]);

const round = (n: number): number => Math.round(n * 1e6) / 1e6;

/** The spacing to measure with, and what it is (PS3.3 10.7.1.1). */
export function choosePixelSpacing(tags: SpacingTags): { spacing: [number, number] | null; source: PixelSpacingSource | null } {
  const pixel = pair(tags.pixelSpacing);
  const imager = pair(tags.imagerPixelSpacing);
  if (pixel) {
    if (tags.calibrationType !== null && tags.calibrationType.trim() !== '') return { spacing: pixel, source: 'calibrated' };
    if (!imager) return { spacing: pixel, source: 'pixel_spacing' };
    if (!same(pixel, imager)) return { spacing: pixel, source: 'calibrated' };
    // Equal to the detector's spacing: not calibrated, so still at the detector (10.7.1.1).
  }
  if (!imager) return { spacing: null, source: null };
  const m = tags.magnification;
  if (m !== null && Number.isFinite(m) && m >= 1 && m <= 10) {
    return { spacing: [round(imager[0] / m), round(imager[1] / m)], source: 'imager_corrected_by_magnification' };
  }
  return { spacing: imager, source: 'imager_pixel_spacing' };
}

/**
 * The unit of a size made from this spacing ('mm', or 'mm²' when squared): one at the detector is
 * not the patient's size, and says so; one corrected by an estimated magnification says that.
 */
export function mmUnit(source: PixelSpacingSource | null | undefined, squared = false): string {
  return `${squared ? 'mm²' : 'mm'}${spacingQualifier(source)}`;
}

/** What follows a length's unit: ' (detector)', ' (est. magnification)', or nothing (in the patient, or unknown). */
export function spacingQualifier(source: PixelSpacingSource | null | undefined): string {
  if (source === 'imager_pixel_spacing') return ' (detector)';
  if (source === 'imager_corrected_by_magnification') return ' (est. magnification)';
  return '';
}
