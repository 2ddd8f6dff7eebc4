/**
 * When running the AI again needs the reader's confirmation. A new analysis becomes the scan's
 * result (PRODUCT.md, Analysis): the findings someone accepted or rejected, and the findings a
 * report was drafted from, are no longer what the viewer shows. A reported scan is not asked
 * about: the server refuses it (409) and its message is shown as it stands.
 */
import type { ScanStatus } from '../../common/vocabulary.ts';

export type ReanalysisContext = {
  status: ScanStatus;
  /** Verdicts the screen knows about that the scan's status may not show yet. */
  reviewedHere: boolean;
  /** Reports of the scan (draft or final), or null when they could not be read. */
  reports: number | null;
};

/** Statuses the server only reaches once a finding has a verdict (server/scans/review-progress). */
const REVIEWED_STATUSES: ReadonlySet<ScanStatus> = new Set(['in_review', 'reviewed']);

/** The question to ask before analysing again, or null to go ahead without asking. */
export function reanalysisQuestion(scanLabel: string, context: ReanalysisContext): string | null {
  if (context.status === 'reported') return null;
  const reasons: string[] = [];
  if (context.reviewedHere || REVIEWED_STATUSES.has(context.status)) {
    reasons.push('Findings of this scan have been accepted or rejected; the new result replaces them and its findings start unreviewed.');
  }
  if (context.reports !== null && context.reports > 0) {
    reasons.push('This scan has a report drafted from the current result; the report keeps the old findings.');
  }
  if (reasons.length === 0) return null;
  return `Analyse ${scanLabel} again?\n\n${reasons.join('\n')}`;
}

/** Scans that may hold a result, reviews or a report: only these can have something to lose. */
export function mayHoldWork(status: ScanStatus): boolean {
  return status !== 'received' && status !== 'queued' && status !== 'analyzing';
}
