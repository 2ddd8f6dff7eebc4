/** SQL for reports. */
import type { ReportStatus, ScanStatus } from '#common/vocabulary.ts';
import { allOf } from '#server/store/conditions.ts';
import { inJsonIds, perDialect, type Database } from '#server/store/database.ts';
import { newPublicId } from '#server/store/public-id.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type ReportRow = {
  id: number;
  public_id: string;
  scan_ref: number;
  analysis_ref: number | null;
  status: ReportStatus;
  impression: string;
  recommendation: string;
  /** What the recommendation was built from (migration 8; server/reports/recommendation.ts). */
  recommendation_basis: 'model' | 'verdicts' | 'reader';
  findings: string;
  author_ref: number;
  created_at: string;
  updated_at: string;
  finalized_at: string | null;
  finalized_by: number | null;
  // Joined for display.
  scan_id: string;
  scan_status: ScanStatus;
  patient_id: string;
  modality: string;
  author_public_id: string;
  author_email: string;
  finalized_by_public_id: string | null;
  analysis_public_id: string | null;
  model_id: string | null;
  /** The analysis's own (model) recommendation, the report's while no finding has a verdict. */
  analysis_recommendation: string | null;
  model_name: string | null;
  model_version: string | null;
  /** The analysis's thresholds (JSON) and operating point, so snapshot findings keep what decided them. */
  analysis_thresholds: string | null;
  analysis_operating_point: string | null;
};

const REPORT_SELECT = `
  SELECT r.*, s.scan_id, s.status AS scan_status, p.patient_id, s.modality, au.public_id AS author_public_id, au.email AS author_email,
         fu.public_id AS finalized_by_public_id, a.public_id AS analysis_public_id,
         a.model_id, a.recommendation AS analysis_recommendation, a.model_name, a.model_version,
         a.thresholds AS analysis_thresholds, a.operating_point AS analysis_operating_point
  FROM reports r
  JOIN scans s ON s.id = r.scan_ref
  JOIN studies st ON st.id = s.study_ref
  JOIN patients p ON p.id = st.patient_ref
  JOIN users au ON au.id = r.author_ref
  LEFT JOIN users fu ON fu.id = r.finalized_by
  LEFT JOIN analyses a ON a.id = r.analysis_ref`;

export type ReportFilter = {
  scanId?: string | undefined;
  patientId?: string | undefined;
  status?: ReportStatus | undefined;
};

export async function insertReport(
  db: Database,
  input: {
    scanRef: number;
    analysisRef: number | null;
    impression: string;
    recommendation: string;
    recommendationBasis: 'model' | 'verdicts';
    findings: string;
    authorRef: number;
    at: string;
  },
): Promise<string> {
  const publicId = newPublicId('rpt');
  (await db.run(`INSERT INTO reports (public_id, scan_ref, analysis_ref, status, impression, recommendation, recommendation_basis, findings,
       author_ref, created_at, updated_at) VALUES (?, ?, ?, 'draft', ?, ?, ?, ?, ?, ?, ?)`, [publicId, input.scanRef, input.analysisRef, input.impression, input.recommendation, input.recommendationBasis, input.findings, input.authorRef, input.at, input.at]));
  return publicId;
}

export async function findReport(db: Database, publicId: string): Promise<ReportRow | undefined> {
  return (await db.get(`${REPORT_SELECT} WHERE r.public_id = ?`, [publicId])) as ReportRow | undefined;
}

/** Reports built on one analysis: drafts to refresh after a verdict, finals that lock it. */
export async function findReportsByAnalysis(db: Database, analysisRef: number): Promise<ReportRow[]> {
  return (await db.all(`${REPORT_SELECT} WHERE r.analysis_ref = ? ORDER BY r.id`, [analysisRef])) as ReportRow[];
}

export async function listReports(db: Database, filter: ReportFilter, page: PageRequest): Promise<Page<ReportRow>> {
  const rows = (await db.all(`${REPORT_SELECT} WHERE r.id > @after
         AND ${allOf([
           filter.scanId !== undefined && 's.scan_id = @scanId',
           filter.patientId !== undefined && 'p.patient_id = @patientId',
           filter.status !== undefined && 'r.status = @status',
         ])}
       ORDER BY r.id LIMIT @limit`, {
      after: page.afterId,
      scanId: filter.scanId ?? null,
      patientId: filter.patientId ?? null,
      status: filter.status ?? null,
      limit: page.limit + 1,
    })) as ReportRow[];
  return toPage(rows, page.limit);
}

/** Updates a draft only; returns false when the report was final (or gone) at write time. */
export async function updateDraftReport(
  db: Database,
  id: number,
  patch: {
    impression?: string | undefined;
    recommendation?: string | undefined;
    recommendationBasis?: ReportRow['recommendation_basis'] | undefined;
    findings?: string | undefined;
    finalizeBy?: number | undefined;
    at: string;
  },
): Promise<boolean> {
  const result = (await db.run(`UPDATE reports SET
         impression = COALESCE(@impression, impression),
         recommendation = COALESCE(@recommendation, recommendation),
         recommendation_basis = COALESCE(@basis, recommendation_basis),
         findings = COALESCE(@findings, findings),
         status = CASE WHEN CAST(@finalizeBy AS BIGINT) IS NULL THEN status ELSE 'final' END,
         finalized_by = COALESCE(@finalizeBy, finalized_by),
         finalized_at = CASE WHEN CAST(@finalizeBy AS BIGINT) IS NULL THEN finalized_at ELSE @at END,
         updated_at = @at
       WHERE id = @id AND status = 'draft'`, {
      id,
      impression: patch.impression ?? null,
      recommendation: patch.recommendation ?? null,
      basis: patch.recommendationBasis ?? null,
      findings: patch.findings ?? null,
      finalizeBy: patch.finalizeBy ?? null,
      at: patch.at,
    }));
  return result === 1;
}

export type AddendumRow = {
  id: number;
  public_id: string;
  report_ref: number;
  text: string;
  finding_changes: string;
  created_at: string;
  author_public_id: string;
  author_email: string;
};

/** Appends a signed section to a report (the table refuses updates and deletes). */
export async function insertAddendum(
  db: Database,
  input: { reportRef: number; authorRef: number; text: string; findingChanges: string; at: string; publicId?: string | undefined },
): Promise<string> {
  const publicId = input.publicId ?? newPublicId('add');
  (await db.run('INSERT INTO report_addenda (public_id, report_ref, author_ref, text, finding_changes, created_at) VALUES (?, ?, ?, ?, ?, ?)', [publicId, input.reportRef, input.authorRef, input.text, input.findingChanges, input.at]));
  return publicId;
}

/** The addenda of many reports with one query, each report's in the order they were added. */
export async function findAddenda(db: Database, reportRefs: readonly number[]): Promise<Map<number, AddendumRow[]>> {
  const byReport = new Map<number, AddendumRow[]>();
  if (reportRefs.length === 0) return byReport;
  const rows = (await db.all(perDialect((d) => `SELECT ad.*, u.public_id AS author_public_id, u.email AS author_email
       FROM report_addenda ad JOIN users u ON u.id = ad.author_ref
      WHERE ad.report_ref ${inJsonIds(d)} ORDER BY ad.created_at, ad.public_id`), [JSON.stringify(reportRefs)])) as AddendumRow[];
  for (const row of rows) byReport.set(row.report_ref, [...(byReport.get(row.report_ref) ?? []), row]);
  return byReport;
}
