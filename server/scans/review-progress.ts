/**
 * The reading workflow moves a scan by itself (state-machine.ts): a radiologist reviewing the
 * AI's findings and finalizing a report should not also have to set statuses by hand, or the
 * worklist could never tell which studies are read and which are reported.
 */
import type { ScanStatus } from '#common/vocabulary.ts';
import { canSystemMove } from '#server/scans/state-machine.ts';
import type { Database } from '#server/store/database.ts';
import { countUnreviewedFindings } from '#server/store/finding-reviews.ts';
import { setScanStatus } from '#server/store/scans.ts';

/** After a verdict on a finding of the scan's current result; call inside its transaction. */
export function advanceAfterReview(db: Database, scan: { ref: number; status: ScanStatus }, at: string): void {
  let status = scan.status;
  const move = (to: 'in_review' | 'reviewed', reason: string): void => {
    setScanStatus(db, scan.ref, to, reason, at);
    status = to;
  };
  if (status === 'analyzed') move('in_review', 'review of the AI findings started');
  const open = countUnreviewedFindings(db, scan.ref);
  if (open === 0 && status === 'in_review') move('reviewed', 'every AI finding accepted or rejected');
  else if (open > 0 && status === 'reviewed') move('in_review', 'a finding verdict was cleared');
}

/** A report on the scan was finalized; call inside its transaction. */
export function markReported(db: Database, scan: { ref: number; status: ScanStatus }, reportId: string, at: string): void {
  if (canSystemMove(scan.status, 'reported')) setScanStatus(db, scan.ref, 'reported', `report ${reportId} finalized`, at);
}
