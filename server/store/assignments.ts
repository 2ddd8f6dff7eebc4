/** SQL for studies assigned to workstations (migration 22). */
import { jsonElements, perDialect, type Database } from '#server/store/database.ts';
import { newPublicId } from '#server/store/public-id.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type AssignmentRow = {
  id: number;
  public_id: string;
  study_uid: string;
  device_ref: number;
  device_id: string;
  device_name: string;
  reader_id: string | null;
  assigned_by: string;
  created_at: string;
  removed_at: string | null;
};

const SELECT = `SELECT a.*, d.device_id, d.name AS device_name FROM study_assignments a JOIN devices d ON d.id = a.device_ref`;

/** A live assignment of the study to the device, made now or already there. */
export async function assignStudy(db: Database, a: { study_uid: string; device_ref: number; reader_id: string | null; assigned_by: string; at: string }): Promise<AssignmentRow> {
  await db.run(`INSERT INTO study_assignments (public_id, study_uid, device_ref, reader_id, assigned_by, created_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (study_uid, device_ref) WHERE removed_at IS NULL DO UPDATE SET reader_id = excluded.reader_id`, [newPublicId('asg'), a.study_uid, a.device_ref, a.reader_id, a.assigned_by, a.at]);
  return (await db.get(`${SELECT} WHERE a.study_uid = ? AND a.device_ref = ? AND a.removed_at IS NULL`, [a.study_uid, a.device_ref])) as AssignmentRow;
}

export async function findAssignment(db: Database, publicId: string): Promise<AssignmentRow | undefined> {
  return (await db.get(`${SELECT} WHERE a.public_id = ?`, [publicId])) as AssignmentRow | undefined;
}

export async function removeAssignment(db: Database, id: number, at: string): Promise<void> {
  await db.run('UPDATE study_assignments SET removed_at = ? WHERE id = ? AND removed_at IS NULL', [at, id]);
}

export async function listAssignments(db: Database, page: PageRequest): Promise<Page<AssignmentRow>> {
  return toPage((await db.all(`${SELECT} WHERE a.id > ? AND a.removed_at IS NULL ORDER BY a.id LIMIT ?`, [page.afterId, page.limit + 1])) as AssignmentRow[], page.limit);
}

/** A device's live assignments, oldest first. */
export async function listDeviceAssignments(db: Database, deviceRef: number, limit: number): Promise<AssignmentRow[]> {
  return (await db.all(`${SELECT} WHERE a.device_ref = ? AND a.removed_at IS NULL ORDER BY a.id LIMIT ?`, [deviceRef, limit])) as AssignmentRow[];
}

/** The files of a study's instances here: what a workstation must hold to read it offline. */
export async function listStudyFiles(db: Database, studyUid: string, limit: number): Promise<{ sha256: string; bytes: number }[]> {
  const rows = (await db.all(`SELECT i.file_sha256 AS sha256, i.file_size AS bytes FROM instances i JOIN scans s ON s.id = i.scan_ref JOIN studies st ON st.id = s.study_ref
     WHERE st.study_uid = ? ORDER BY i.id LIMIT ?`, [studyUid, limit])) as { sha256: string; bytes: number | string }[];
  return rows.map((r) => ({ sha256: r.sha256, bytes: Number(r.bytes) }));
}

/**
 * Per study, the newest instance row id and the count of them: instance rows are only ever added,
 * so these two change whenever a study's files do (a study with none: 0 and 0).
 */
export async function studyFileStamps(db: Database, studyUids: readonly string[]): Promise<Map<string, { last: number; count: number }>> {
  const out = new Map<string, { last: number; count: number }>();
  if (studyUids.length === 0) return out;
  const rows = (await db.all(
    perDialect((d) => `SELECT st.study_uid, coalesce(max(i.id), 0) AS last, count(i.id) AS n FROM studies st
       LEFT JOIN scans s ON s.study_ref = st.id LEFT JOIN instances i ON i.scan_ref = s.id
      WHERE st.study_uid IN (SELECT value FROM ${jsonElements(d, '?')}) GROUP BY st.study_uid`),
    [JSON.stringify(studyUids)],
  )) as { study_uid: string; last: number | string; n: number | string }[];
  for (const r of rows) out.set(r.study_uid, { last: Number(r.last), count: Number(r.n) });
  return out;
}

export async function studyExists(db: Database, studyUid: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS one FROM studies WHERE study_uid = ?', [studyUid])) !== undefined;
}
