/** SQL for what an SR document is written from: the study and patient of a scan, the stored
 * instances it references, and the names of the people who reviewed and signed. */
import { inJsonIds, jsonElements, perDialect, type Database } from '#server/store/database.ts';

export type ScanStudyRow = {
  scan_ref: number;
  scan_id: string;
  modality: string;
  study_uid: string;
  study_date: string | null;
  study_time: string | null;
  study_description: string | null;
  accession_number: string | null;
  patient_id: string;
  patient_name: string | null;
  birth_date: string | null;
  sex: string | null;
};

export async function findScanStudy(db: Database, scanRef: number): Promise<ScanStudyRow | undefined> {
  return await db.get<ScanStudyRow>(`SELECT s.id AS scan_ref, s.scan_id, s.modality, st.study_uid, st.study_date, st.study_time,
         st.description AS study_description, st.accession_number, p.patient_id, p.name AS patient_name, p.birth_date, p.sex
       FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.id = ?`, [scanRef]);
}

/** An archived instance as a reference needs it: its SOP class, series, frames and file. */
export type StoredInstanceRow = {
  sop_instance_uid: string;
  sop_class_uid: string | null;
  series_uid: string;
  study_uid: string;
  frames: number;
  file_path: string;
};

const STORED_SELECT = `SELECT i.sop_instance_uid, i.sop_class_uid, s.scan_id AS series_uid, st.study_uid, i.frames, i.file_path
  FROM instances i JOIN scans s ON s.id = i.scan_ref JOIN studies st ON st.id = s.study_ref`;

const STORED_BY_UIDS = perDialect((d) => `${STORED_SELECT} WHERE i.sop_instance_uid IN (SELECT value FROM ${jsonElements(d, '?')}) ORDER BY i.sop_instance_uid`);

export async function findStoredInstances(db: Database, sopInstanceUids: readonly string[]): Promise<StoredInstanceRow[]> {
  if (sopInstanceUids.length === 0) return [];
  return await db.all<StoredInstanceRow>(STORED_BY_UIDS, [JSON.stringify(sopInstanceUids)]);
}

/** Every instance of a series: what the model read, the evidence of its result. */
export async function listStoredInstancesOfScan(db: Database, scanRef: number): Promise<StoredInstanceRow[]> {
  return await db.all<StoredInstanceRow>(`${STORED_SELECT} WHERE i.scan_ref = ? ORDER BY i.sop_instance_uid`, [scanRef]);
}

export type PersonRow = { id: number; name: string | null; email: string };

const USERS_BY_IDS = perDialect((d) => `SELECT id, name, email FROM users WHERE id ${inJsonIds(d)}`);

export async function findPeople(db: Database, ids: readonly number[]): Promise<Map<number, PersonRow>> {
  if (ids.length === 0) return new Map();
  const rows = await db.all<PersonRow>(USERS_BY_IDS, [JSON.stringify([...new Set(ids)])]);
  return new Map(rows.map((r) => [r.id, r]));
}
