/**
 * Findings a radiologist adds where the model missed one (issue 11, reading tools): a box on one
 * frame of the scan and a label from the glossary. It joins the scan's latest analysis, so the
 * report's snapshot, its recommendation (it counts as accepted) and the final-report lock treat
 * it exactly like the model's findings: after finalizing, adding one is refused with 409 and
 * the reader adds it with an addendum instead (POST /v1/reports/{id}/addenda, new_findings).
 */
import type { FindingV11 } from '#server/api/schemas.ts';
import { conflict } from '#server/errors.ts';
import { checkReaderFinding } from '#server/findings/reader-finding-check.ts';
import { loadSliceIndex } from '#server/findings/places.ts';
import type { ModelVocabularies } from '#server/reports/recommendation.ts';
import { beforeVerdict } from '#server/reports/reports.ts';
import { reviewChanged } from '#server/scans/lifecycle.ts';
import { getScanRow, type ScanDeps } from '#server/scans/scans.ts';
import { toFinding } from '#server/scans/scan-views.ts';
import { findAnalysesByIds, findFindingsByAnalyses, insertReaderFinding, type ReaderFindingInput } from '#server/store/analyses.ts';
import { recordReaderFindingWrite } from '#server/reports/report-sync.ts';
import type { Replica } from '#server/sync/replica.ts';
import { inDurableTransaction } from '#server/store/database.ts';

export async function addReaderFinding(
  deps: ScanDeps & { replica: Replica },
  vocabularies: ModelVocabularies,
  glossaryLabels: ReadonlySet<string>,
  userRef: number,
  scanId: string,
  input: ReaderFindingInput,
): Promise<{ finding: FindingV11; patientId: string }> {
  return await inDurableTransaction(deps.db, async (tx) => {
    const scan = await getScanRow({ ...deps, db: tx }, scanId);
    if (scan.latest_analysis_ref === null) {
      throw conflict('This scan has no analysis to add a finding to', `scan status is ${scan.status}; analyse it first, then add what the model missed`);
    }
    await checkReaderFinding(tx, glossaryLabels, scan, input);
    // 409 when a final report was built on this analysis; otherwise its drafts follow.
    const followDrafts = await beforeVerdict({ ...deps, db: tx }, scan.latest_analysis_ref);
    const at = deps.clock.now().toISOString();
    const publicId = await insertReaderFinding(tx, scan.latest_analysis_ref, input, userRef, at);
    const analysis = (await findAnalysesByIds(tx, [scan.latest_analysis_ref])).get(scan.latest_analysis_ref);
    if (analysis) await recordReaderFindingWrite(tx, deps.replica, { ...input, id: publicId, analysisId: analysis.public_id, userRef, at });
    await followDrafts(vocabularies, at);
    await reviewChanged(tx, { ref: scan.id, status: scan.status }, at);
    const row = ((await findFindingsByAnalyses(tx, [scan.latest_analysis_ref])).get(scan.latest_analysis_ref) ?? []).find((f) => f.public_id === publicId);
    if (!row) throw conflict('The finding was not stored', 'try again');
    return { finding: toFinding(row, await loadSliceIndex(tx, scan.id, [row.instance_uid])), patientId: scan.patient_id };
  });
}
