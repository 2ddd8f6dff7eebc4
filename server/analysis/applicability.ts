/**
 * Does a model apply to a scan? The manifest's applies_to says which modalities, body part,
 * minimum slice count, image types and photometric interpretations it was trained for; a scan
 * outside them is recorded as not applicable (with this reason), never run and never "failed".
 */
import type { Manifest } from '#server/analysis/manifest.ts';

export type ScanFacts = {
  modality: string;
  bodyPart: string | null;
  /** Frames over all instances: a multi-frame instance counts each frame as a slice. */
  slices: number;
  instances: ReadonlyArray<{ samples_per_pixel: number; photometric: string }>;
};

export function notApplicableReason(manifest: Pick<Manifest, 'applies_to' | 'name'>, scan: ScanFacts): string | null {
  const a = manifest.applies_to;
  if (!(a.modalities as readonly string[]).includes(scan.modality)) {
    return `modality ${scan.modality || '(none)'}: ${manifest.name} analyses ${a.modalities.join(', ')} only`;
  }
  // Body Part Examined is optional and often missing (PS3.3 C.7.3.1); only a stated different
  // part rules a scan out.
  if (a.body_part && scan.bodyPart && scan.bodyPart.toUpperCase() !== a.body_part.toUpperCase()) {
    return `body part ${scan.bodyPart}: ${manifest.name} analyses ${a.body_part} only`;
  }
  if (scan.slices < a.min_slices) {
    return `${scan.slices} slice(s): ${manifest.name} needs a series of at least ${a.min_slices}`;
  }
  const colour = scan.instances.find((i) => i.samples_per_pixel !== 1);
  if (colour) return `colour images (${colour.samples_per_pixel} samples per pixel): ${manifest.name} analyses greyscale images only`;
  if (a.photometric) {
    const other = scan.instances.find((i) => !(a.photometric as readonly string[]).includes(i.photometric));
    if (other) return `photometric interpretation ${other.photometric}: ${manifest.name} analyses ${a.photometric.join(', ')} only`;
  }
  return null;
}

/** Image Type value 1 (PS3.3 C.7.6.1.1.2: ORIGINAL or DERIVED); files without one pass. */
export function imageTypeReason(manifest: Pick<Manifest, 'applies_to' | 'name'>, imageType: readonly string[]): string | null {
  const first = imageType[0]?.trim().toUpperCase();
  if (!first) return null;
  if (manifest.applies_to.image_types.some((t) => t.toUpperCase() === first)) return null;
  return `image type ${imageType.join('\\')}: ${manifest.name} analyses ${manifest.applies_to.image_types.join(', ')} images only`;
}
