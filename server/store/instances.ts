/**
 * SQL for instances as the import and the viewers see them: what is stored under a SOP
 * Instance UID, the display attributes the archive index keeps beside it, and a series' images
 * in slice order.
 */
import { z } from 'zod';
import { PIXEL_SPACING_SOURCES, type PixelSpacingSource } from '#common/pixel-spacing.ts';
import { inJsonIds, perDialect, type Database } from '#server/store/database.ts';

export type StoredSpacing = { spacing: [number, number] | null; source: PixelSpacingSource | null };

const spacingPair = z.tuple([z.number(), z.number()]);
// instances.pixel_spacing holds {spacing, source}; files imported before the source was kept
// hold the bare [row, column] pair, whose source is unknown (null): no migration re-reads files.
const storedSpacing = z.union([
  z.object({ spacing: spacingPair, source: z.enum(PIXEL_SPACING_SOURCES) }),
  spacingPair.transform((spacing) => ({ spacing, source: null })),
]);

export function encodeSpacing(spacing: [number, number] | null, source: PixelSpacingSource | null): string | null {
  return spacing ? JSON.stringify({ spacing, source: source ?? 'pixel_spacing' }) : null;
}

/** The stored pixel spacing of an instance and where it came from; null spacing when absent or unreadable. */
export function decodeSpacing(text: string | null): StoredSpacing {
  if (text === null) return { spacing: null, source: null };
  const parsed = storedSpacing.safeParse(JSON.parse(text));
  return parsed.success ? parsed.data : { spacing: null, source: null };
}

export type InstanceImagingInput = {
  samplesPerPixel: number;
  photometric: string;
  bitsAllocated: number;
  bitsStored: number;
  pixelRepresentation: number;
  rescaleSlope: number;
  rescaleIntercept: number;
  windowCenter: number | null;
  windowWidth: number | null;
  imagePosition: string | null;
  imageOrientation: string | null;
  /** JSON of the API's frame_values (import-schemas.ts), or null. */
  frameValues: string | null;
  framesProblem: string | null;
};

export type InstanceRow = {
  id: number;
  sop_instance_uid: string;
  scan_ref: number;
  scan_id: string;
  patient_id: string;
  modality: string;
  sop_class_uid: string | null;
  transfer_syntax: string;
  rows: number;
  columns: number;
  frames: number;
  instance_number: number | null;
  position: number | null;
  pixel_spacing: string | null;
  file_path: string;
  file_sha256: string;
  file_size: number;
  samples_per_pixel: number;
  photometric: string;
  bits_allocated: number;
  bits_stored: number;
  pixel_representation: number;
  rescale_slope: number;
  rescale_intercept: number;
  window_center: number | null;
  window_width: number | null;
  frame_values: string | null;
  frames_problem: string | null;
  /** JSON of Image Orientation (Patient), six direction cosines, or null. */
  image_orientation: string | null;
};

const INSTANCE_SELECT = `
  SELECT i.*, s.scan_id, s.modality, p.patient_id
  FROM instances i JOIN scans s ON s.id = i.scan_ref JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref`;

/** The digest stored under a SOP Instance UID: tells a duplicate from a conflict. */
export async function findStoredDigest(db: Database, sopInstanceUid: string): Promise<string | undefined> {
  const row = (await db.get('SELECT file_sha256 FROM instances WHERE sop_instance_uid = ?', [sopInstanceUid])) as { file_sha256: string } | undefined;
  return row?.file_sha256;
}

export async function findInstance(db: Database, sopInstanceUid: string): Promise<InstanceRow | undefined> {
  return (await db.get(`${INSTANCE_SELECT} WHERE i.sop_instance_uid = ?`, [sopInstanceUid])) as InstanceRow | undefined;
}

/**
 * A series' instances in slice order: position along the slice normal, then Instance Number;
 * instances without either sort last. `offset` pages through the ordered list.
 */
export async function listScanInstances(db: Database, scanRef: number, offset: number, limit: number): Promise<InstanceRow[]> {
  return (await db.all(`${INSTANCE_SELECT} WHERE i.scan_ref = ?
       ORDER BY i.position IS NULL, i.position, i.instance_number IS NULL, i.instance_number, i.id
       LIMIT ? OFFSET ?`, [scanRef, limit, offset])) as InstanceRow[];
}

const SLICE_ORDER = 'i.position IS NULL, i.position, i.instance_number IS NULL, i.instance_number, i.id';

/** What an analysis reads of each instance: where its frames are and whether they are greyscale. */
export type SliceSourceRow = Pick<InstanceRow, 'sop_instance_uid' | 'file_path' | 'frames' | 'samples_per_pixel' | 'photometric'>;

/**
 * A scan's instances in slice order (listScanInstances'), only the columns an analysis reads:
 * the full rows with their joins took ~1.3 ms of a 100-slice job's start, before inference can
 * begin, against ~0.3 ms for these.
 */
export async function listScanSliceSources(db: Database, scanRef: number): Promise<SliceSourceRow[]> {
  return await db.all<SliceSourceRow>(`SELECT i.sop_instance_uid, i.file_path, i.frames, i.samples_per_pixel, i.photometric FROM instances i
     WHERE i.scan_ref = ? ORDER BY ${SLICE_ORDER}`, [scanRef]);
}

/** Every instance of each series, in slice order (listScanInstances'), with one query. */
export async function listInstancesOfScans(db: Database, scanRefs: readonly number[]): Promise<Map<number, InstanceRow[]>> {
  const byScan = new Map<number, InstanceRow[]>(scanRefs.map((ref) => [ref, []]));
  if (scanRefs.length === 0) return byScan;
  for (const row of await db.all<InstanceRow>(INSTANCES_OF_SCANS, [JSON.stringify(scanRefs)])) byScan.get(row.scan_ref)?.push(row);
  return byScan;
}

const INSTANCES_OF_SCANS = perDialect((d) => `${INSTANCE_SELECT} WHERE i.scan_ref ${inJsonIds(d)} ORDER BY i.scan_ref, ${SLICE_ORDER}`);

export async function countScanInstances(db: Database, scanRef: number): Promise<number> {
  return ((await db.get('SELECT COUNT(*) AS n FROM instances WHERE scan_ref = ?', [scanRef])) as { n: number }).n;
}

/** Every stored file with its digest, for consistency checks. */
export async function listStoredFiles(db: Database): Promise<Array<{ sop_instance_uid: string; file_path: string; file_sha256: string; file_size: number }>> {
  return (await db.all('SELECT sop_instance_uid, file_path, file_sha256, file_size FROM instances ORDER BY id')) as Array<{
    sop_instance_uid: string;
    file_path: string;
    file_sha256: string;
    file_size: number;
  }>;
}
