/** SQL for reading scans with their study and patient, and for changing a scan's status. */
import type { ScanStatus } from '#common/vocabulary.ts';
import { sql, type Database } from '#server/store/database.ts';
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

const FILTER_SQL = `
  (@patientId IS NULL OR p.patient_id = @patientId)
  AND (@modality IS NULL OR s.modality = @modality)
  AND (@status IS NULL OR s.status = @status)
  AND (@scanId IS NULL OR s.scan_id = @scanId)`;

function filterParams(filter: ScanFilter): Record<string, string | null> {
  return {
    patientId: filter.patientId ?? null,
    modality: filter.modality ?? null,
    status: filter.status ?? null,
    scanId: filter.scanId ?? null,
  };
}

export function listScans(db: Database, filter: ScanFilter, page: PageRequest): Page<ScanRow> {
  const rows = sql(db, `${SCAN_SELECT} WHERE s.id > @after AND ${FILTER_SQL} ORDER BY s.id LIMIT @limit`)
    .all({ ...filterParams(filter), after: page.afterId, limit: page.limit + 1 }) as ScanRow[];
  return toPage(rows, page.limit);
}

export type ResultFilter = ScanFilter & { label?: string | undefined; minConfidence?: number | undefined };

/** Scans that have a succeeded analysis; with a label or confidence filter, only scans whose
 * latest analysis has a matching finding. */
export function listScansWithResults(db: Database, filter: ResultFilter, page: PageRequest): Page<ScanRow> {
  const rows = sql(db,
      `${SCAN_SELECT} WHERE s.id > @after AND ${FILTER_SQL} AND s.latest_analysis_ref IS NOT NULL
         AND ((@label IS NULL AND @minConfidence IS NULL) OR EXISTS (
           SELECT 1 FROM findings f WHERE f.analysis_ref = s.latest_analysis_ref
             AND (@label IS NULL OR f.label = @label)
             AND (@minConfidence IS NULL OR f.confidence >= @minConfidence)))
       ORDER BY s.id LIMIT @limit`,
    )
    .all({
      ...filterParams(filter),
      label: filter.label ?? null,
      minConfidence: filter.minConfidence ?? null,
      after: page.afterId,
      limit: page.limit + 1,
    }) as ScanRow[];
  return toPage(rows, page.limit);
}

/** Every scan of the given studies, in series order: the series of a page of studies. */
export function listScansOfStudies(db: Database, studyRefs: readonly number[]): ScanRow[] {
  if (studyRefs.length === 0) return [];
  return sql(db, `${SCAN_SELECT} WHERE s.study_ref IN (SELECT value FROM json_each(?)) ORDER BY s.series_number IS NULL, s.series_number, s.id`)
    .all(JSON.stringify(studyRefs)) as ScanRow[];
}

export function findScan(db: Database, scanId: string): ScanRow | undefined {
  return sql(db, `${SCAN_SELECT} WHERE s.scan_id = ?`).get(scanId) as ScanRow | undefined;
}

export function setScanStatus(db: Database, id: number, status: ScanStatus, reason: string | null, at: string): void {
  sql(db, 'UPDATE scans SET status = ?, status_reason = ?, updated_at = ? WHERE id = ?').run(status, reason, at, id);
}
