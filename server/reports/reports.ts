/**
 * Radiology reports: a draft starts from the scan's latest analysis (a snapshot of its findings
 * and its recommendation), the radiologist edits impression and recommendation, and finalizing
 * makes it immutable: a signed report is a medico-legal record. While a draft, the snapshot
 * follows the reader's verdicts and so does the recommendation (unless the reader wrote it);
 * a final report locks the verdicts it was built on, and a later change of mind is an addendum,
 * a signed, dated section appended to it (issue 11).
 */
import { routeEvent } from '#server/routing/rules.ts';
import { mapInOrder } from '#server/in-order.ts';
import { z } from 'zod';
import type { Addendum, Report } from '#server/api/schemas.ts';
import { findingV11 } from '#server/api/schemas.ts';
import type { Clock } from '#server/clock.ts';
import { conflict, invalid, MiaError, notFound } from '#server/errors.ts';
import type { FindingReview } from '#common/vocabulary.ts';
import { findFindingsByAnalyses, insertReaderFinding, type ReaderFindingInput } from '#server/store/analyses.ts';
import { checkReaderFinding } from '#server/findings/reader-finding-check.ts';
import { findFindingWithScan } from '#server/store/finding-reviews.ts';
import { reportRecommendation, type ModelVocabularies } from '#server/reports/recommendation.ts';
import type { Database } from '#server/store/database.ts';
import { inDurableTransaction } from '#server/store/database.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import type { AddendumRow, ReportFilter, ReportRow } from '#server/store/reports.ts';
import {
  findAddenda,
  findReport,
  findReportsByAnalysis,
  insertAddendum,
  insertReport,
  listReports as listReportRows,
  updateDraftReport,
} from '#server/store/reports.ts';
import { reportFinalized } from '#server/scans/lifecycle.ts';
import { recordVerdict } from '#server/scans/verdict-events.ts';
import type { Replica } from '#server/sync/replica.ts';
import { recordAddendumWrite, recordReaderFindingWrite, recordReportWrite } from '#server/reports/report-sync.ts';
import { listReportConflicts, type ConflictRow } from '#server/store/report-sync.ts';
import { getScanRow } from '#server/scans/scans.ts';
import { decisionOfAnalysis, loadLatestAnalyses, toFinding } from '#server/scans/scan-views.ts';
import { groupLesions } from '#server/findings/lesions.ts';
import { loadSliceIndex } from '#server/findings/places.ts';
import { toMeasurement } from '#server/measurements/measurements.ts';
import { listReportMeasurements, type MeasurementRow } from '#server/store/measurements.ts';

export type ReportDeps = { db: Database; clock: Clock };

const reportMeasurements = async (db: Database, row: ReportRow): Promise<MeasurementRow[]> => await listReportMeasurements(db, row.scan_ref, row.author_ref, row.finalized_at);

const findingsSnapshot = z.array(findingV11);
const findingChanges = z.array(
  z.object({ finding_id: z.string(), label: z.string(), from: z.enum(['accepted', 'rejected']).nullable(), to: z.enum(['accepted', 'rejected']).nullable(), added: z.boolean().optional() }),
);

function toAddendum(row: AddendumRow): Addendum {
  return {
    id: row.public_id,
    author: { id: row.author_public_id, email: row.author_email },
    created_at: row.created_at,
    text: row.text,
    finding_changes: findingChanges.parse(JSON.parse(row.finding_changes)),
  };
}

export function toReport(row: ReportRow, addenda: readonly AddendumRow[] = [], measurements: readonly MeasurementRow[] = [], conflicts: readonly ConflictRow[] = []): Report {
  const findings = findingsSnapshot.parse(JSON.parse(row.findings));
  return {
    id: row.public_id,
    scan_id: row.scan_id,
    patient_id: row.patient_id,
    modality: row.modality,
    status: row.status,
    impression: row.impression,
    recommendation: row.recommendation,
    recommendation_basis: row.recommendation_basis,
    findings,
    analysis:
      row.analysis_public_id && row.model_name && row.model_version
        ? { id: row.analysis_public_id, model_name: row.model_name, model_version: row.model_version }
        : null,
    author: { id: row.author_public_id, email: row.author_email },
    created_at: row.created_at,
    updated_at: row.updated_at,
    finalized_at: row.finalized_at,
    finalized_by: row.finalized_by_public_id,
    addenda: addenda.map(toAddendum),
    lesions: groupLesions(findings),
    measurements: measurements.map(toMeasurement),
    conflicts: conflicts.map((c) => ({ field: c.field, value: c.value, user_id: c.user_id, user_email: c.user_email ?? null, written_at: c.created_at })),
  };
}

export async function getReport(deps: ReportDeps, reportId: string): Promise<Report> {
  const row = await findReport(deps.db, reportId);
  if (!row) throw notFound('Report', reportId);
  return toReport(row, (await findAddenda(deps.db, [row.id])).get(row.id), await reportMeasurements(deps.db, row), await listReportConflicts(deps.db, row.id));
}

export async function listReports(deps: ReportDeps, filter: ReportFilter, page: PageRequest): Promise<Page<Report>> {
  const rows = await listReportRows(deps.db, filter, page);
  const addenda = await findAddenda(deps.db, rows.items.map((r) => r.id));
  return { items: await mapInOrder(rows.items, async (r) => toReport(r, addenda.get(r.id), await reportMeasurements(deps.db, r), await listReportConflicts(deps.db, r.id))), nextAfterId: rows.nextAfterId };
}

/** The findings of a report's analysis as they are now, and the recommendation they make. */
async function currentBasis(deps: ReportDeps, vocabularies: ModelVocabularies, row: ReportRow) {
  const findings = row.analysis_ref === null ? [] : ((await findFindingsByAnalyses(deps.db, [row.analysis_ref])).get(row.analysis_ref) ?? []);
  const recommendation = reportRecommendation(vocabularies, {
    modelId: row.model_id ?? '',
    modality: row.modality,
    findings,
    modelSuggestion: row.analysis_recommendation ?? '',
  });
  // The snapshot keeps each finding's place (slice, size in mm), so a signed report keeps its sizes.
  const slices = await loadSliceIndex(deps.db, row.scan_ref, findings.map((f) => f.instance_uid));
  const decision = row.model_version === null ? undefined : decisionOfAnalysis({ thresholds: row.analysis_thresholds ?? '{}', model_version: row.model_version, operating_point: row.analysis_operating_point });
  return { findings: JSON.stringify(findings.map((f) => toFinding(f, slices, decision))), recommendation };
}

/**
 * Brings a draft's snapshot up to its analysis's verdicts, and its recommendation unless the
 * reader wrote it; call inside the transaction that changed them.
 */
async function refreshDraft(deps: ReportDeps, vocabularies: ModelVocabularies, row: ReportRow, at: string): Promise<void> {
  if (row.status !== 'draft') return;
  const current = await currentBasis(deps, vocabularies, row);
  const ownText = row.recommendation_basis === 'reader';
  await updateDraftReport(deps.db, row.id, {
    findings: current.findings,
    recommendation: ownText ? undefined : current.recommendation.text,
    recommendationBasis: ownText ? undefined : current.recommendation.basis,
    at,
  });
}

/**
 * Verdicts on findings that a final report was built on are locked (409 naming the report);
 * otherwise the drafts on them follow. Call inside the verdict's transaction, before it.
 */
export async function beforeVerdict(deps: ReportDeps, analysisRef: number): Promise<(vocabularies: ModelVocabularies, at: string) => Promise<void>> {
  const reports = await findReportsByAnalysis(deps.db, analysisRef);
  const final = reports.find((r) => r.status === 'final');
  if (final) {
    throw conflict(
      'This finding is part of a final report; its verdict is locked',
      `report ${final.public_id} was finalized at ${final.finalized_at ?? 'unknown time'}; add an addendum to change a verdict: POST /v1/reports/${final.public_id}/addenda`,
    );
  }
  return async (vocabularies, at) => {
    for (const row of reports) await refreshDraft(deps, vocabularies, row, at);
  };
}

/** Rejected findings stay in the snapshot, marked, so the report shows what the AI proposed. */
export async function draftReport(
  deps: ReportDeps & { replica: Replica },
  vocabularies: ModelVocabularies,
  authorRef: number,
  input: { scanId: string; impression?: string | undefined },
): Promise<Report> {
  const reportId = await inDurableTransaction(deps.db, async (tx) => {
    const scan = await getScanRow({ ...deps, db: tx }, input.scanId);
    if (scan.latest_analysis_ref === null) {
      throw conflict('This scan has no analysis to draft a report from', `scan status is ${scan.status}; analyse it first`);
    }
    // One signed report per result: a second draft beside a final report would let the scan
    // carry two diagnoses; a later change of mind is an addendum to the signed one (issue 11).
    const final = (await findReportsByAnalysis(tx, scan.latest_analysis_ref)).find((r) => r.status === 'final');
    if (final) {
      throw conflict(
        `This scan's report is final (report ${final.public_id}); a new draft cannot replace it`,
        `report ${final.public_id} was finalized at ${final.finalized_at ?? 'unknown time'}; add an addendum instead: POST /v1/reports/${final.public_id}/addenda`,
      );
    }
    const { analyses, findings } = await loadLatestAnalyses(tx, [scan]);
    const analysis = analyses.get(scan.latest_analysis_ref);
    if (!analysis) throw new MiaError('internal', 'latest analysis missing');
    const rows = findings.get(analysis.id) ?? [];
    const slices = await loadSliceIndex(tx, scan.id, rows.map((f) => f.instance_uid));
    const recommendation = reportRecommendation(vocabularies, {
      modelId: analysis.model_id,
      modality: scan.modality,
      findings: rows,
      modelSuggestion: analysis.recommendation ?? '',
    });
    const reportId = await insertReport(tx, {
      scanRef: scan.id,
      analysisRef: analysis.id,
      impression: input.impression ?? '',
      recommendation: recommendation.text,
      recommendationBasis: recommendation.basis,
      findings: JSON.stringify(rows.map((f) => toFinding(f, slices, decisionOfAnalysis(analysis)))),
      authorRef,
      at: deps.clock.now().toISOString(),
    });
    await recordReportWrite(tx, deps.replica, reportId, authorRef, { impression: true, recommendation: true, final: false });
    return reportId;
  });
  return await getReport(deps, reportId);
}

export async function updateReport(
  deps: ReportDeps & { replica: Replica },
  vocabularies: ModelVocabularies,
  userRef: number,
  reportId: string,
  patch: { impression?: string | undefined; recommendation?: string | undefined; status?: 'final' | undefined },
): Promise<Report> {
  await inDurableTransaction(deps.db, async (tx) => {
    const row = await findReport(tx, reportId);
    if (!row) throw notFound('Report', reportId);
    if (row.status !== 'draft') {
      throw conflict('This report is final and cannot be changed', `finalized at ${row.finalized_at ?? 'unknown time'}; add an addendum: POST /v1/reports/${reportId}/addenda`);
    }
    const at = deps.clock.now().toISOString();
    // A client that sends back the text it was shown has not written a recommendation of its
    // own (the renderer always sends both fields); only a different text is the reader's.
    const ownText = patch.recommendation !== undefined && patch.recommendation !== row.recommendation;
    // What is signed is built on the verdicts as they are at signing.
    if (patch.status === 'final') await refreshDraft({ ...deps, db: tx }, vocabularies, row, at);
    const updated = await updateDraftReport(tx, row.id, {
      impression: patch.impression,
      recommendation: ownText ? patch.recommendation : undefined,
      recommendationBasis: ownText ? 'reader' : undefined,
      finalizeBy: patch.status === 'final' ? userRef : undefined,
      at,
    });
    if (!updated) throw new MiaError('internal', 'draft report changed under its transaction');
    await recordReportWrite(tx, deps.replica, reportId, userRef, { impression: patch.impression !== undefined, recommendation: ownText, final: patch.status === 'final' });
    if (patch.status === 'final') {
      await reportFinalized(tx, { ref: row.scan_ref, status: row.scan_status }, reportId, at);
      // In the signing transaction: a signed report's sends are never lost to a crash.
      await routeEvent(tx, { event: 'report.finalized', reportId }, at);
    }
  });
  return await getReport(deps, reportId);
}

export type VerdictChange = { id: string; review: FindingReview | null };

/**
 * Appends a signed section to a final report. Verdict changes it records are applied to the
 * findings (so the scan's result shows the reader's current view) while the report's signed
 * snapshot keeps the verdicts it was built on; the addendum says what changed.
 */
export async function addAddendum(
  deps: ReportDeps & { replica: Replica },
  author: { ref: number; id: string },
  reportId: string,
  input: {
    text: string;
    findings?: readonly VerdictChange[] | undefined;
    /** Reader-drawn findings added after signing, checked against the glossary's labels. */
    newFindings?: { items: readonly ReaderFindingInput[]; labels: ReadonlySet<string> } | undefined;
  },
): Promise<Report> {
  await inDurableTransaction(deps.db, async (tx) => {
    const row = await findReport(tx, reportId);
    if (!row) throw notFound('Report', reportId);
    if (row.status !== 'final') {
      throw conflict('This report is a draft; edit it instead of adding an addendum', 'addenda are added to final reports only');
    }
    const at = deps.clock.now().toISOString();
    const requested = input.findings ?? [];
    const changes: Addendum['finding_changes'] = await mapInOrder(requested, async (change, index) => {
      if (requested.findIndex((c) => c.id === change.id) !== index) throw invalid('A finding is listed twice', `finding ${change.id} appears more than once in findings`);
      const finding = await findFindingWithScan(tx, change.id);
      if (!finding || finding.analysis_ref !== row.analysis_ref) {
        throw invalid('A finding is not part of this report', `finding ${change.id} is not a finding of report ${reportId}`);
      }
      await recordVerdict(tx, deps.replica, { finding: { ref: finding.id, publicId: finding.public_id }, verdict: change.review, reason: null, user: author, at });
      return { finding_id: change.id, label: finding.label, from: finding.review, to: change.review };
    });
    // A finding the model missed, seen after signing, joins the analysis accepted (the signed
    // snapshot stays as signed); the addendum records it as a change from nothing to accepted.
    for (const item of input.newFindings?.items ?? []) {
      if (row.analysis_ref === null) throw conflict('This report has no analysis to add a finding to', 'write the finding in the addendum text');
      await checkReaderFinding(tx, input.newFindings?.labels ?? new Set(), { id: row.scan_ref, scan_id: row.scan_id }, item);
      const id = await insertReaderFinding(tx, row.analysis_ref, item, author.ref, at);
      if (row.analysis_public_id !== null) await recordReaderFindingWrite(tx, deps.replica, { ...item, id, analysisId: row.analysis_public_id, userRef: author.ref, at });
      changes.push({ finding_id: id, label: item.label, from: null, to: 'accepted', added: true });
    }
    const addendumId = await insertAddendum(tx, { reportRef: row.id, authorRef: author.ref, text: input.text, findingChanges: JSON.stringify(changes), at });
    await recordAddendumWrite(tx, deps.replica, { id: addendumId, reportId, authorId: author.id, text: input.text, findingChanges: changes, at });
  });
  return await getReport(deps, reportId);
}
