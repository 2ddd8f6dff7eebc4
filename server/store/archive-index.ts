/**
 * SQL that indexes what the archive holds: patients, studies, scans (series) and instances.
 * Upserts keep the first-seen descriptive values: later files of the same series must not
 * silently rewrite what a radiologist already saw in the worklist.
 */
import type { Database } from '#server/store/database.ts';
import type { InstanceImagingInput } from '#server/store/instances.ts';
import { searchFold } from '#server/store/search-fold.ts';

export type PatientInput = { patientId: string; name: string | null; birthDate: string | null; sex: string | null };
export type StudyInput = {
  studyUid: string;
  studyDate: string | null;
  studyTime: string | null;
  description: string | null;
  accessionNumber: string | null;
};
export type ScanInput = {
  scanId: string;
  modality: string;
  bodyPart: string | null;
  description: string | null;
  seriesNumber: number | null;
};
export type InstanceInput = {
  sopInstanceUid: string;
  sopClassUid: string | null;
  transferSyntax: string;
  rows: number;
  columns: number;
  frames: number;
  instanceNumber: number | null;
  position: number | null;
  pixelSpacing: string | null;
  filePath: string;
  fileSha256: string;
  fileSize: number;
  /** What the viewer and the model need to display and read the pixels. */
  imaging: InstanceImagingInput;
};

/**
 * The id of a row found by its unique key, inserting it first if it is missing. Most files
 * belong to a patient, study and series already stored, so the lookup comes first: one statement
 * instead of an insert that does nothing and a lookup. A concurrent insert of the same key (read
 * committed on a hub) makes ours do nothing; the second lookup then sees the committed row.
 */
async function idOf(db: Database, select: string, key: string, insert: () => Promise<{ id: number } | undefined>): Promise<number> {
  const found = (await db.get(select, [key])) as { id: number } | undefined;
  if (found) return found.id;
  const inserted = await insert();
  if (inserted) return inserted.id;
  return ((await db.get(select, [key])) as { id: number }).id;
}

export async function upsertPatient(db: Database, input: PatientInput, at: string): Promise<number> {
  return await idOf(db, 'SELECT id FROM patients WHERE patient_id = ?', input.patientId, async () =>
    (await db.get(`INSERT INTO patients (patient_id, name, birth_date, sex, name_fold, patient_id_fold, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (patient_id) DO NOTHING RETURNING id`,
      [input.patientId, input.name, input.birthDate, input.sex, searchFold(input.name ?? ''), searchFold(input.patientId), at])) as { id: number } | undefined);
}

export async function upsertStudy(db: Database, patientRef: number, input: StudyInput, at: string): Promise<number> {
  return await idOf(db, 'SELECT id FROM studies WHERE study_uid = ?', input.studyUid, async () =>
    (await db.get(`INSERT INTO studies (study_uid, patient_ref, study_date, study_time, description, accession_number, text_fold, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (study_uid) DO NOTHING RETURNING id`,
      [input.studyUid, patientRef, input.studyDate, input.studyTime, input.description, input.accessionNumber,
        searchFold(`${input.accessionNumber ?? ''} ${input.description ?? ''}`), at])) as { id: number } | undefined);
}

export async function upsertScan(db: Database, studyRef: number, input: ScanInput, at: string): Promise<number> {
  return await idOf(db, 'SELECT id FROM scans WHERE scan_id = ?', input.scanId, async () =>
    (await db.get(`INSERT INTO scans (scan_id, study_ref, modality, body_part, description, series_number, created_at, updated_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scan_id) DO NOTHING RETURNING id`,
      [input.scanId, studyRef, input.modality, input.bodyPart, input.description, input.seriesNumber, at, at])) as { id: number } | undefined);
}

/** Returns false when the SOP Instance UID is already indexed (the caller decides what that means). */
export async function insertInstance(db: Database, scanRef: number, input: InstanceInput, at: string): Promise<boolean> {
  if (!(await insertUncountedInstance(db, scanRef, input, at))) return false;
  await countScanInstances(db, scanRef, 1, at);
  return true;
}

/**
 * `insertInstance` without the scan's instance count: a batch adds its instances to each scan's
 * count once (`countScanInstances`), one statement per scan instead of one per instance. Until
 * then the count is short, so both must run in one transaction.
 */
export async function insertUncountedInstance(db: Database, scanRef: number, input: InstanceInput, at: string): Promise<boolean> {
  const { imaging, ...identity } = input;
  const result = (await db.run(`INSERT INTO instances (sop_instance_uid, scan_ref, sop_class_uid, transfer_syntax, rows, columns, frames,
         instance_number, position, pixel_spacing, file_path, file_sha256, file_size, created_at,
         samples_per_pixel, photometric, bits_allocated, bits_stored, pixel_representation, rescale_slope, rescale_intercept,
         window_center, window_width, image_position, image_orientation, frame_values, frames_problem)
       VALUES (@sopInstanceUid, @scanRef, @sopClassUid, @transferSyntax, @rows, @columns, @frames,
         @instanceNumber, @position, @pixelSpacing, @filePath, @fileSha256, @fileSize, @at,
         @samplesPerPixel, @photometric, @bitsAllocated, @bitsStored, @pixelRepresentation, @rescaleSlope, @rescaleIntercept,
         @windowCenter, @windowWidth, @imagePosition, @imageOrientation, @frameValues, @framesProblem)
       ON CONFLICT (sop_instance_uid) DO NOTHING`, { ...identity, ...imaging, scanRef, at }));
  return result !== 0;
}

/** Adds `added` newly indexed instances to a scan's count (an addition: concurrent importers on a hub both count). */
export async function countScanInstances(db: Database, scanRef: number, added: number, at: string): Promise<void> {
  await db.run('UPDATE scans SET instance_count = instance_count + ?, updated_at = ? WHERE id = ?', [added, at, scanRef]);
}
