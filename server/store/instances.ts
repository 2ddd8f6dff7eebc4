/**
 * SQL for instances as the import and the viewers see them: what is stored under a SOP
 * Instance UID, the display attributes the archive index keeps beside it, and a series' images
 * in slice order.
 */
import { PIXEL_SPACING_SOURCES, type PixelSpacingSource } from '#common/pixel-spacing.ts';
import { inJsonIds, jsonElements, perDialect, type Database } from '#server/store/database.ts';
import { isNumberPair, isOneOf, isRecord, parsedAs } from '#server/store/stored-json.ts';

export type StoredSpacing = { spacing: [number, number] | null; source: PixelSpacingSource | null };

const isSpacingSource = isOneOf(PIXEL_SPACING_SOURCES);

// instances.pixel_spacing holds {spacing, source}; files imported before the source was kept
// hold the bare [row, column] pair, whose source is unknown (null): no migration re-reads files.
function isStoredSpacing(value: unknown): value is { spacing: [number, number]; source: PixelSpacingSource } | [number, number] {
  return isNumberPair(value) || (isRecord(value) && isNumberPair(value['spacing']) && isSpacingSource(value['source']));
}

export function encodeSpacing(spacing: [number, number] | null, source: PixelSpacingSource | null): string | null {
  return spacing ? JSON.stringify({ spacing, source: source ?? 'pixel_spacing' }) : null;
}

/** The stored pixel spacing of an instance and where it came from; null spacing when absent or unreadable. */
export function decodeSpacing(text: string | null): StoredSpacing {
  if (text === null) return { spacing: null, source: null };
  const stored = parsedAs(text, isStoredSpacing);
  if (stored === null) return { spacing: null, source: null };
  return Array.isArray(stored) ? { spacing: stored, source: null } : { spacing: stored.spacing, source: stored.source };
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

/**
 * An instance a finding is on, with its place in its series: `before`, the slices (frames) of the
 * instances ahead of it in slice order, and `slices`, the series' count.
 */
export type PlacedInstanceRow = Pick<InstanceRow, 'scan_ref' | 'sop_instance_uid' | 'frames' | 'position' | 'pixel_spacing' | 'frame_values'> & {
  before: number;
  slices: number;
};

// Counted by the database, so only the instances asked for come back: a page of results read
// every instance of every series with a finding, as objects (50 CT results of 150 slices each:
// 107 ms, 2026-11-26). SLICE_ORDER, spelt as ranges the (scan_ref, position, instance_number)
// index can seek: the instances at lower positions, then those at the same position before it by
// instance number and id (coalesce keeps NULLs out of that row-value comparison); one without a
// position comes after every positioned one. For 34 findings mid-series in 150-slice series this
// took 0.79 ms, the same sort key compared against every instance of the series 1.33 ms, and a
// window over each series 8-9 ms (it sorts them all).
const PLACED_INSTANCES = perDialect((d) => {
  const frames = d === 'sqlite' ? 'max(j.frames, 1)' : 'greatest(j.frames, 1)';
  const count = (where: string): string => `(SELECT coalesce(sum(${frames}), 0) FROM instances j WHERE j.scan_ref = w.scan_ref AND ${where})`;
  const tie = (t: string): string => `(${t}.instance_number IS NULL, coalesce(${t}.instance_number, 0), ${t}.id)`;
  return `SELECT w.scan_ref, w.sop_instance_uid, w.frames, w.position, w.pixel_spacing, w.frame_values,
         CASE WHEN w.position IS NULL
              THEN ${count('j.position IS NOT NULL')} + ${count(`j.position IS NULL AND ${tie('j')} < ${tie('w')}`)}
              ELSE ${count('j.position < w.position')} + ${count(`j.position = w.position AND ${tie('j')} < ${tie('w')}`)}
         END AS before,
         ${count('TRUE')} AS slices
    FROM instances w
   WHERE w.sop_instance_uid IN (SELECT value FROM ${jsonElements(d, '?')}) AND w.scan_ref ${inJsonIds(d, '?')}`;
});

/** The given instances of the given series, each with its place in its series (PlacedInstanceRow). */
export async function findPlacedInstances(db: Database, scanRefs: readonly number[], instanceUids: readonly string[]): Promise<PlacedInstanceRow[]> {
  if (scanRefs.length === 0 || instanceUids.length === 0) return [];
  return (await db.values(PLACED_INSTANCES, [JSON.stringify(instanceUids), JSON.stringify(scanRefs)])).map((v) => ({
    scan_ref: v[0] as number,
    sop_instance_uid: v[1] as string,
    frames: v[2] as number,
    position: v[3] as number | null,
    pixel_spacing: v[4] as string | null,
    frame_values: v[5] as string | null,
    before: Number(v[6]),
    slices: Number(v[7]),
  }));
}

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
