/** SQL for reports as sync sees them (migration 20): field timestamps, signed bodies, conflicts. */
import type { ScanStatus } from '#common/vocabulary.ts';
import type { Database } from '#server/store/database.ts';

export type ReportSyncRow = {
  id: number;
  public_id: string;
  status: 'draft' | 'final';
  impression: string;
  recommendation: string;
  recommendation_basis: 'model' | 'verdicts' | 'reader';
  findings: string;
  impression_hlc: string | null;
  recommendation_hlc: string | null;
  final_hlc: string | null;
  final_change_id: string | null;
  finalized_at: string | null;
  finalized_by: number | null;
  finalized_by_public_id: string | null;
};

export async function findReportForSync(db: Database, publicId: string): Promise<ReportSyncRow | undefined> {
  return (await db.get(`SELECT r.id, r.public_id, r.status, r.impression, r.recommendation, r.recommendation_basis, r.findings, r.impression_hlc,
       r.recommendation_hlc, r.final_hlc, r.final_change_id, r.finalized_at, r.finalized_by, u.public_id AS finalized_by_public_id
     FROM reports r LEFT JOIN users u ON u.id = r.finalized_by WHERE r.public_id = ?`, [publicId])) as ReportSyncRow | undefined;
}

/** The timestamps of the values a local write just gave a report's fields. */
export async function stampReportFields(db: Database, reportRef: number, hlc: string, fields: { impression: boolean; recommendation: boolean }): Promise<void> {
  await db.run(`UPDATE reports SET impression_hlc = CASE WHEN ? THEN ? ELSE impression_hlc END,
       recommendation_hlc = CASE WHEN ? THEN ? ELSE recommendation_hlc END WHERE id = ?`, [fields.impression ? 1 : 0, hlc, fields.recommendation ? 1 : 0, hlc, reportRef]);
}

export async function stampReportFinal(db: Database, reportRef: number, hlc: string, changeId: string): Promise<void> {
  await db.run('UPDATE reports SET final_hlc = ?, final_change_id = ? WHERE id = ?', [hlc, changeId, reportRef]);
}

export async function insertSyncedReport(
  db: Database,
  r: { public_id: string; scan_ref: number; analysis_ref: number | null; author_ref: number; created_at: string },
): Promise<number> {
  const row = (await db.get(`INSERT INTO reports (public_id, scan_ref, analysis_ref, status, impression, recommendation, recommendation_basis, findings,
       author_ref, created_at, updated_at) VALUES (?, ?, ?, 'draft', '', '', 'model', '[]', ?, ?, ?) RETURNING id`, [r.public_id, r.scan_ref, r.analysis_ref, r.author_ref, r.created_at, r.created_at])) as { id: number };
  return row.id;
}

/** Sets one draft field when the incoming timestamp is newer than the value's (last writer wins). */
export async function setDraftFieldIfNewer(db: Database, reportRef: number, field: 'impression' | 'recommendation', value: string, basis: string | null, hlc: string, at: string): Promise<boolean> {
  const column = field === 'impression' ? 'impression' : 'recommendation';
  const stamp = `${column}_hlc`;
  const changed = await db.run(`UPDATE reports SET ${column} = ?, ${stamp} = ?, updated_at = ?
       ${field === 'recommendation' ? ', recommendation_basis = COALESCE(?, recommendation_basis)' : ''}
     WHERE id = ? AND status = 'draft' AND (${stamp} IS NULL OR ${stamp} < ?)`,
  field === 'recommendation' ? [value, hlc, at, basis, reportRef, hlc] : [value, hlc, at, reportRef, hlc]);
  return changed === 1;
}

/** Makes a report final with a signed body, or replaces the body of one signed later (by HLC). */
export async function setSignedBody(
  db: Database,
  reportRef: number,
  body: { impression: string; recommendation: string; recommendation_basis: string; findings: string; finalized_at: string; finalized_by: number; hlc: string; change_id: string; impression_hlc: string | null; recommendation_hlc: string | null },
): Promise<void> {
  await db.run(`UPDATE reports SET status = 'final', impression = ?, recommendation = ?, recommendation_basis = ?, findings = ?, finalized_at = ?, finalized_by = ?,
       final_hlc = ?, final_change_id = ?, impression_hlc = ?, recommendation_hlc = ?, updated_at = ? WHERE id = ?`, [
    body.impression, body.recommendation, body.recommendation_basis, body.findings, body.finalized_at, body.finalized_by,
    body.hlc, body.change_id, body.impression_hlc, body.recommendation_hlc, body.finalized_at, reportRef,
  ]);
}

export type ConflictRow = { field: 'impression' | 'recommendation'; value: string; hlc: string; user_id: string | null; created_at: string; user_email?: string | null };

export async function insertReportConflict(db: Database, reportRef: number, c: ConflictRow): Promise<void> {
  await db.run(`INSERT INTO report_conflicts (report_ref, field, value, hlc, user_id, created_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (report_ref, field, hlc) DO NOTHING`, [reportRef, c.field, c.value, c.hlc, c.user_id, c.created_at]);
}

export async function listReportConflicts(db: Database, reportRef: number): Promise<ConflictRow[]> {
  return (await db.all(`SELECT c.field, c.value, c.hlc, c.user_id, c.created_at, u.email AS user_email
     FROM report_conflicts c LEFT JOIN users u ON u.public_id = c.user_id WHERE c.report_ref = ? ORDER BY c.hlc, c.field`, [reportRef])) as ConflictRow[];
}

/** A write to a report taken in here (migration 21); the same change twice is one write. */
export async function insertReportWrite(db: Database, w: { change_id: string; report_ref: number; hlc: string; user_id: string | null; fields: string }): Promise<void> {
  await db.run('INSERT INTO report_writes (change_id, report_ref, hlc, user_id, fields) VALUES (?, ?, ?, ?, ?) ON CONFLICT (change_id) DO NOTHING', [w.change_id, w.report_ref, w.hlc, w.user_id, w.fields]);
}

/**
 * Every write to a report this replica took in, but not its own ones that the hub refused for
 * good: the history its conflicts are derived from.
 */
export async function listReportWrites(db: Database, reportRef: number): Promise<{ hlc: string; user_id: string | null; fields: string }[]> {
  return (await db.all(`SELECT w.hlc, w.user_id, w.fields FROM report_writes w LEFT JOIN sync_changes c ON c.change_id = w.change_id
     WHERE w.report_ref = ? AND (c.push_state IS NULL OR c.push_state <> 'rejected')`, [reportRef])) as { hlc: string; user_id: string | null; fields: string }[];
}

export async function deleteReportConflicts(db: Database, reportRef: number): Promise<void> {
  await db.run('DELETE FROM report_conflicts WHERE report_ref = ?', [reportRef]);
}

export async function addendumExists(db: Database, publicId: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS one FROM report_addenda WHERE public_id = ?', [publicId])) !== undefined;
}

export async function findingExists(db: Database, publicId: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS one FROM findings WHERE public_id = ?', [publicId])) !== undefined;
}

export async function findAnalysisRef(db: Database, publicId: string): Promise<number | undefined> {
  const row = (await db.get('SELECT id FROM analyses WHERE public_id = ?', [publicId])) as { id: number } | undefined;
  return row?.id;
}

/** The scan an analysis belongs to, and whether the analysis is that scan's latest. */
export async function findAnalysisScan(db: Database, analysisRef: number): Promise<{ id: number; status: ScanStatus; latest: boolean } | undefined> {
  const row = (await db.get('SELECT s.id, s.status, s.latest_analysis_ref FROM analyses a JOIN scans s ON s.id = a.scan_ref WHERE a.id = ?', [analysisRef])) as { id: number; status: ScanStatus; latest_analysis_ref: number | null } | undefined;
  return row ? { id: row.id, status: row.status, latest: row.latest_analysis_ref === analysisRef } : undefined;
}
