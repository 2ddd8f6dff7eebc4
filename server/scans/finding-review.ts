/**
 * A reviewer's verdict on one AI finding: accepted, rejected, or cleared (null). Recorded with
 * who and when; the route audits it as findings.review with the patient and scan. A finding a
 * final report was built on is locked (409: change it through an addendum); drafts built on it
 * follow the verdict (server/reports/reports.ts).
 */
import type { FindingReview } from '#common/vocabulary.ts';
import type { ScanResultV11 } from '#server/api/schemas.ts';
import { notFound } from '#server/errors.ts';
import { inDurableTransaction } from '#server/store/database.ts';
import { findFindingWithScan } from '#server/store/finding-reviews.ts';
import type { ModelVocabularies } from '#server/reports/recommendation.ts';
import { beforeVerdict } from '#server/reports/reports.ts';
import { reviewChanged } from '#server/scans/lifecycle.ts';
import type { ScanDeps } from '#server/scans/scans.ts';
import { toFinding } from '#server/scans/scan-views.ts';
import { recordVerdict } from '#server/scans/verdict-events.ts';
import type { Replica } from '#server/sync/replica.ts';
import { loadSliceIndex } from '#server/findings/places.ts';

export type ReviewedFinding = { finding: ScanResultV11['findings'][number]; scanId: string; patientId: string };

export async function reviewFinding(
  deps: ScanDeps & { replica: Replica },
  vocabularies: ModelVocabularies,
  reviewer: { ref: number; id: string },
  findingId: string,
  review: FindingReview | null,
  reason: string | null = null,
): Promise<ReviewedFinding> {
  return await inDurableTransaction(deps.db, async (tx) => {
    const row = await findFindingWithScan(tx, findingId);
    if (!row) throw notFound('Finding', findingId);
    const followDrafts = await beforeVerdict({ ...deps, db: tx }, row.analysis_ref);
    const now = deps.clock.now().toISOString();
    // A reason is kept with a rejection only (the route refuses one with another verdict).
    const kept = review === 'rejected' ? reason : null;
    // An event that has seen every verdict before it (and so settles a dispute), synced as such.
    await recordVerdict(tx, deps.replica, { finding: { ref: row.id, publicId: row.public_id }, verdict: review, reason: kept, user: reviewer, at: now });
    await followDrafts(vocabularies, deps.clock.now().toISOString());
    // Verdicts on an older analysis's findings do not move the scan: its result is another.
    if (row.is_latest) await reviewChanged(tx, { ref: row.scan_ref, status: row.scan_status }, deps.clock.now().toISOString());
    return {
      finding: toFinding({ ...row, review, review_reason: kept, review_disputed: 0 }, await loadSliceIndex(tx, row.scan_ref, [row.instance_uid])),
      scanId: row.scan_id,
      patientId: row.patient_id,
    };
  });
}
