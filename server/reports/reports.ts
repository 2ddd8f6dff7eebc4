/**
 * Radiology reports: a draft starts from the scan's latest analysis (a snapshot of its findings
 * and its recommendation), the radiologist edits impression and recommendation, and finalizing
 * makes it immutable: a signed report is a medico-legal record.
 */
import { z } from 'zod';
import type { Report } from '#server/api/schemas.ts';
import { findingV11 } from '#server/api/schemas.ts';
import type { Clock } from '#server/clock.ts';
import { conflict, MiaError, notFound } from '#server/errors.ts';
import type { Database } from '#server/store/database.ts';
import { inDurableTransaction } from '#server/store/database.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import type { ReportFilter, ReportRow } from '#server/store/reports.ts';
import { findReport, insertReport, listReports as listReportRows, updateDraftReport } from '#server/store/reports.ts';
import { markReported } from '#server/scans/review-progress.ts';
import { getScanRow } from '#server/scans/scans.ts';
import { loadLatestAnalyses, toFinding } from '#server/scans/scan-views.ts';

export type ReportDeps = { db: Database; clock: Clock };

const findingsSnapshot = z.array(findingV11);

export function toReport(row: ReportRow): Report {
  return {
    id: row.public_id,
    scan_id: row.scan_id,
    patient_id: row.patient_id,
    modality: row.modality,
    status: row.status,
    impression: row.impression,
    recommendation: row.recommendation,
    findings: findingsSnapshot.parse(JSON.parse(row.findings)),
    analysis:
      row.analysis_public_id && row.model_name && row.model_version
        ? { id: row.analysis_public_id, model_name: row.model_name, model_version: row.model_version }
        : null,
    author: { id: row.author_public_id, email: row.author_email },
    created_at: row.created_at,
    updated_at: row.updated_at,
    finalized_at: row.finalized_at,
    finalized_by: row.finalized_by_public_id,
  };
}

export function getReport(deps: ReportDeps, reportId: string): Report {
  const row = findReport(deps.db, reportId);
  if (!row) throw notFound('Report', reportId);
  return toReport(row);
}

export function listReports(deps: ReportDeps, filter: ReportFilter, page: PageRequest): Page<Report> {
  const rows = listReportRows(deps.db, filter, page);
  return { items: rows.items.map(toReport), nextAfterId: rows.nextAfterId };
}

/** Rejected findings stay in the snapshot, marked, so the report shows what the AI proposed. */
export function draftReport(
  deps: ReportDeps,
  authorRef: number,
  input: { scanId: string; impression?: string | undefined },
): Report {
  const reportId = inDurableTransaction(deps.db, () => {
    const scan = getScanRow(deps, input.scanId);
    if (scan.latest_analysis_ref === null) {
      throw conflict('This scan has no analysis to draft a report from', `scan status is ${scan.status}; analyse it first`);
    }
    const { analyses, findings } = loadLatestAnalyses(deps.db, [scan]);
    const analysis = analyses.get(scan.latest_analysis_ref);
    if (!analysis) throw new MiaError('internal', 'latest analysis missing');
    return insertReport(deps.db, {
      scanRef: scan.id,
      analysisRef: analysis.id,
      impression: input.impression ?? '',
      recommendation: analysis.recommendation ?? '',
      findings: JSON.stringify((findings.get(analysis.id) ?? []).map(toFinding)),
      authorRef,
      at: deps.clock.now().toISOString(),
    });
  });
  return getReport(deps, reportId);
}

export function updateReport(
  deps: ReportDeps,
  userRef: number,
  reportId: string,
  patch: { impression?: string | undefined; recommendation?: string | undefined; status?: 'final' | undefined },
): Report {
  inDurableTransaction(deps.db, () => {
    const row = findReport(deps.db, reportId);
    if (!row) throw notFound('Report', reportId);
    const at = deps.clock.now().toISOString();
    const updated = updateDraftReport(deps.db, row.id, {
      impression: patch.impression,
      recommendation: patch.recommendation,
      finalizeBy: patch.status === 'final' ? userRef : undefined,
      at,
    });
    if (!updated) {
      throw conflict('This report is final and cannot be changed', `finalized at ${row.finalized_at ?? 'unknown time'}; write an addendum as a new report`);
    }
    if (patch.status === 'final') markReported(deps.db, { ref: row.scan_ref, status: row.scan_status }, reportId, at);
  });
  return getReport(deps, reportId);
}
