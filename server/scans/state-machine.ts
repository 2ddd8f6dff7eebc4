/**
 * Scan states (PRODUCT.md, Scan states):
 *   received -> queued -> analyzing -> analyzed | failed;
 *   analyzed -> in_review -> reviewed -> reported; any state -> archived.
 * Clients may request queued (analyse again), in_review, reviewed, reported and archived; the
 * analysis engine sets analyzing, analyzed and failed; the reading workflow moves a scan along
 * by itself as findings are reviewed and its report is finalized (review-progress.ts).
 */
import type { ClientScanStatus, ScanStatus } from '#common/vocabulary.ts';
import { CLIENT_SCAN_STATUSES, SCAN_STATUSES } from '#common/vocabulary.ts';
import { conflict, invalid } from '#server/errors.ts';

const ALL_BUT_ARCHIVED = SCAN_STATUSES.filter((s) => s !== 'archived');

/** For each state a client may request: the states it may be requested from. */
const CLIENT_FROM: Record<ClientScanStatus, readonly ScanStatus[]> = {
  // A scan under review may be analysed again (a new model); a reported one is closed.
  queued: ['received', 'analyzed', 'failed', 'in_review', 'reviewed'],
  in_review: ['analyzed'],
  reviewed: ['in_review'],
  reported: ['reviewed'],
  archived: ALL_BUT_ARCHIVED,
};

/**
 * Transitions only the system makes. Besides the analysis path: a job interrupted by a restart
 * is queued again (analyzing -> queued); a scan the model does not apply to, or whose analysis
 * was cancelled, goes back to where it was before queuing - received, or analyzed when an
 * earlier result still stands - with the reason in status_reason. Reviewing: the first verdict
 * on a finding starts the review, a verdict on the last open finding completes it (clearing
 * one reopens it), and finalizing a report reports the scan from any reading state.
 */
const SYSTEM_FROM: Record<Exclude<ScanStatus, 'archived'>, readonly ScanStatus[]> = {
  received: ['queued', 'analyzing'],
  queued: ['received', 'analyzed', 'failed', 'analyzing', 'in_review', 'reviewed'],
  analyzing: ['queued'],
  analyzed: ['analyzing', 'queued'],
  failed: ['queued', 'analyzing'],
  in_review: ['analyzed', 'reviewed'],
  reviewed: ['in_review'],
  reported: ['analyzed', 'in_review', 'reviewed'],
};

export function clientTargetsFrom(from: ScanStatus): ClientScanStatus[] {
  return CLIENT_SCAN_STATUSES.filter((target) => CLIENT_FROM[target].includes(from));
}

function isClientStatus(value: string): value is ClientScanStatus {
  return (CLIENT_SCAN_STATUSES as readonly string[]).includes(value);
}

/** Validates a client's request to move a scan from `from` to `requested`. */
export function checkClientTransition(from: ScanStatus, requested: string): ClientScanStatus {
  if (!isClientStatus(requested)) {
    const known = (SCAN_STATUSES as readonly string[]).includes(requested);
    throw invalid(
      known ? `Status ${requested} is set by the system, not by clients` : `Unknown status '${requested.slice(0, 40)}'`,
      `status: clients may set ${CLIENT_SCAN_STATUSES.join(', ')}`,
    );
  }
  if (!CLIENT_FROM[requested].includes(from)) {
    const allowed = clientTargetsFrom(from);
    throw conflict(
      `A scan in status ${from} cannot move to ${requested}`,
      allowed.length > 0 ? `allowed targets from ${from}: ${allowed.join(', ')}` : `no status change is allowed from ${from}`,
    );
  }
  return requested;
}

export function canSystemMove(from: ScanStatus, to: keyof typeof SYSTEM_FROM): boolean {
  return SYSTEM_FROM[to].includes(from);
}
