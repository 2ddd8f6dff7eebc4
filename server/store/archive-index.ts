/**
 * SQL that indexes what the archive holds: patients, studies, scans (series) and instances.
 * Upserts keep the first-seen descriptive values: later files of the same series must not
 * silently rewrite what a radiologist already saw in the worklist.
 */
import type { Database } from '#server/store/database.ts';

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
};

export async function upsertPatient(db: Database, input: PatientInput, at: string): Promise<number> {
  (await db.run(`INSERT INTO patients (patient_id, name, birth_date, sex, created_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (patient_id) DO NOTHING`, [input.patientId, input.name, input.birthDate, input.sex, at]));
  return ((await db.get('SELECT id FROM patients WHERE patient_id = ?', [input.patientId])) as { id: number }).id;
}

export async function upsertStudy(db: Database, patientRef: number, input: StudyInput, at: string): Promise<number> {
  (await db.run(`INSERT INTO studies (study_uid, patient_ref, study_date, study_time, description, accession_number, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (study_uid) DO NOTHING`, [input.studyUid, patientRef, input.studyDate, input.studyTime, input.description, input.accessionNumber, at]));
  return ((await db.get('SELECT id FROM studies WHERE study_uid = ?', [input.studyUid])) as { id: number }).id;
}

export async function upsertScan(db: Database, studyRef: number, input: ScanInput, at: string): Promise<number> {
  (await db.run(`INSERT INTO scans (scan_id, study_ref, modality, body_part, description, series_number, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (scan_id) DO NOTHING`, [input.scanId, studyRef, input.modality, input.bodyPart, input.description, input.seriesNumber, at, at]));
  return ((await db.get('SELECT id FROM scans WHERE scan_id = ?', [input.scanId])) as { id: number }).id;
}

/** Returns false when the SOP Instance UID is already indexed (the caller decides what that means). */
export async function insertInstance(db: Database, scanRef: number, input: InstanceInput, at: string): Promise<boolean> {
  const result = (await db.run(`INSERT INTO instances (sop_instance_uid, scan_ref, sop_class_uid, transfer_syntax, rows, columns, frames,
         instance_number, position, pixel_spacing, file_path, file_sha256, file_size, created_at)
       VALUES (@sopInstanceUid, @scanRef, @sopClassUid, @transferSyntax, @rows, @columns, @frames,
         @instanceNumber, @position, @pixelSpacing, @filePath, @fileSha256, @fileSize, @at)
       ON CONFLICT (sop_instance_uid) DO NOTHING`, { ...input, scanRef, at }));
  if (result === 0) return false;
  (await db.run('UPDATE scans SET instance_count = instance_count + 1, updated_at = ? WHERE id = ?', [at, scanRef]));
  return true;
}
