/** SQL for reading scans with their study and patient, and for changing a scan's status. */
import type { ScanStatus } from '#common/vocabulary.ts';
import { inJsonIds, perDialect, type Database } from '#server/store/database.ts';
import { allOf } from '#server/store/conditions.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type ScanRow = {
  id: number;
  scan_id: string;
  patient_id: string;
  study_uid: string;
  study_date: string | null;
  study_description: string | null;
  accession_number: string | null;
  modality: string;
  body_part: string | null;
  description: string | null;
  series_number: number | null;
  instance_count: number;
  status: ScanStatus;
  status_reason: string | null;
  created_at: string;
  updated_at: string;
  latest_analysis_ref: number | null;
  study_ref: number;
};

export type ScanFilter = {
  patientId?: string | undefined;
  modality?: string | undefined;
  status?: ScanStatus | undefined;
  scanId?: string | undefined;
};

const SCAN_SELECT = `
  SELECT s.id, s.scan_id, p.patient_id, st.study_uid, st.study_date, st.description AS study_description,
         st.accession_number, s.modality, s.body_part, s.description, s.series_number, s.instance_count,
         s.status, s.status_reason, s.created_at, s.updated_at, s.latest_analysis_ref, s.study_ref
  FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref`;

/**
 * SCAN_SELECT's row, read as an array (Database.values) and made an object here in one fixed
 * shape: better-sqlite3 building an object per row was most of a studies page's scan statement
 * (cpu-prof, 2026-11-26), as it was for results (store/results.ts).
 */
function toScanRow(v: readonly unknown[]): ScanRow {
  return {
    id: v[0] as number,
    scan_id: v[1] as string,
    patient_id: v[2] as string,
    study_uid: v[3] as string,
    study_date: v[4] as string | null,
    study_description: v[5] as string | null,
    accession_number: v[6] as string | null,
    modality: v[7] as string,
    body_part: v[8] as string | null,
    description: v[9] as string | null,
    series_number: v[10] as number | null,
    instance_count: v[11] as number,
    status: v[12] as ScanStatus,
    status_reason: v[13] as string | null,
    created_at: v[14] as string,
    updated_at: v[15] as string,
    latest_analysis_ref: v[16] as number | null,
    study_ref: v[17] as number,
  };
}

function filterSql(filter: ScanFilter): string {
  return allOf([
    filter.patientId !== undefined && 'p.patient_id = @patientId',
    filter.modality !== undefined && 's.modality = @modality',
    filter.status !== undefined && 's.status = @status',
    filter.scanId !== undefined && 's.scan_id = @scanId',
  ]);
}

function filterParams(filter: ScanFilter): Record<string, string | null> {
  return {
    patientId: filter.patientId ?? null,
    modality: filter.modality ?? null,
    status: filter.status ?? null,
    scanId: filter.scanId ?? null,
  };
}

export async function listScans(db: Database, filter: ScanFilter, page: PageRequest): Promise<Page<ScanRow>> {
  const rows = (await db.values(`${SCAN_SELECT} WHERE s.id > @after AND ${filterSql(filter)} ORDER BY s.id LIMIT @limit`, { ...filterParams(filter), after: page.afterId, limit: page.limit + 1 })).map(toScanRow);
  return toPage(rows, page.limit);
}

/** `throughId`: scans up to this row id only (an export's share of the list, read by a worker). */
export type ResultFilter = ScanFilter & { label?: string | undefined; minConfidence?: number | undefined; throughId?: number | undefined };

const SCANS_OF_STUDIES = perDialect((d) => `${SCAN_SELECT} WHERE s.study_ref ${inJsonIds(d)} ORDER BY s.series_number IS NULL, s.series_number, s.id`);

/** Every scan of the given studies, in series order: the series of a page of studies. */
export async function listScansOfStudies(db: Database, studyRefs: readonly number[]): Promise<ScanRow[]> {
  if (studyRefs.length === 0) return [];
  return (await db.values(SCANS_OF_STUDIES, [JSON.stringify(studyRefs)])).map(toScanRow);
}

export async function findScan(db: Database, scanId: string): Promise<ScanRow | undefined> {
  return (await db.get(`${SCAN_SELECT} WHERE s.scan_id = ?`, [scanId])) as ScanRow | undefined;
}

/** Moves a scan from the status its caller read; false when it has another by now. */
export async function setScanStatus(db: Database, id: number, from: ScanStatus, status: ScanStatus, reason: string | null, at: string): Promise<boolean> {
  return (await db.run('UPDATE scans SET status = ?, status_reason = ?, updated_at = ? WHERE id = ? AND status = ?', [status, reason, at, id, from])) === 1;
}

/** The HLC of the newest archive decision this replica took in for the scan (migration 24). */
export async function readArchivedHlc(db: Database, scanRef: number): Promise<string | null> {
  const row = (await db.get('SELECT archived_hlc FROM scans WHERE id = ?', [scanRef])) as { archived_hlc: string | null } | undefined;
  return row?.archived_hlc ?? null;
}

export async function stampArchived(db: Database, scanRef: number, hlc: string): Promise<void> {
  await db.run('UPDATE scans SET archived_hlc = ? WHERE id = ?', [hlc, scanRef]);
}
