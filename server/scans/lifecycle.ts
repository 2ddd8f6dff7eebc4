/**
 * The one place a scan's status changes (issue 12): each function is an event of the scan's life
 * (an analysis queued, started, finished; a review begun or completed; a report signed; a
 * client's request) and decides by the state machine (state-machine.ts, PRODUCT.md "Scan
 * states") whether and where the scan moves. The analysis queue, the reading workflow and the
 * status route call these instead of writing a status, so the rules live once; the architecture
 * test keeps the store's status writer private to this module.
 *
 * Each takes the scan as its caller read it inside the caller's transaction ({ ref, status }) and
 * must run in that transaction, so the check and the write cannot be split by another writer.
 */
import type { ClientScanStatus, ScanStatus } from '#common/vocabulary.ts';
import { conflict } from '#server/errors.ts';
import { canSystemMove, checkClientTransition } from '#server/scans/state-machine.ts';
import type { Database } from '#server/store/database.ts';
import { countUnreviewedFindings } from '#server/store/finding-reviews.ts';
import { setScanStatus } from '#server/store/scans.ts';

export type ScanState = { ref: number; status: ScanStatus };

/** What an event did: the scan's status after it, and whether it changed. */
export type Move = { from: ScanStatus; to: ScanStatus; moved: boolean };

/** Status reasons are shown on the worklist; a model's or codec's message may be long. */
const MAX_REASON = 500;

async function move(db: Database, scan: ScanState, to: ScanStatus, reason: string | null, at: string): Promise<Move> {
  // Compare-and-set on the status the caller read: a caller outside its transaction, or a
  // writer in another process, cannot have its change silently overwritten.
  if (!(await setScanStatus(db, scan.ref, scan.status, to, reason === null ? null : reason.slice(0, MAX_REASON), at))) {
    throw conflict('The scan changed meanwhile', `its status is no longer ${scan.status}; read it again and retry`);
  }
  return { from: scan.status, to, moved: true };
}

const stay = (scan: ScanState): Move => ({ from: scan.status, to: scan.status, moved: false });

/** A client's request (POST /v1/scans/{scan_id}): 400 for a status clients may not set, 409 with the allowed targets otherwise. */
export async function clientRequested(db: Database, scan: ScanState, requested: string, at: string): Promise<Move & { to: ClientScanStatus }> {
  const target = checkClientTransition(scan.status, requested);
  return { ...await move(db, scan, target, null, at), to: target };
}

/** An analysis job was queued. A scan a client already set to queued stays so; one that cannot be analysed is 409. */
export async function analysisQueued(db: Database, scan: ScanState, at: string): Promise<Move> {
  if (scan.status !== 'queued' && !canSystemMove(scan.status, 'queued')) {
    throw conflict(`A scan in status ${scan.status} cannot be analysed`, 'analysis is possible from received, analyzed, failed, in_review or reviewed');
  }
  return await move(db, scan, 'queued', null, at);
}

/** A worker took the job. False when the scan moved meanwhile (archived, reported) and must not be analysed. */
export async function analysisStarted(db: Database, scan: ScanState, at: string): Promise<boolean> {
  if (scan.status === 'analyzing') return true;
  if (!canSystemMove(scan.status, 'analyzing')) return false;
  await move(db, scan, 'analyzing', null, at);
  return true;
}

export async function analysisSucceeded(db: Database, scan: ScanState, at: string): Promise<Move> {
  return canSystemMove(scan.status, 'analyzed') ? await move(db, scan, 'analyzed', null, at) : stay(scan);
}

/**
 * A finished analysis arrived from another replica (sync) and became the scan's result: a scan
 * that had none is analyzed; one further along keeps its status.
 */
export async function resultSynced(db: Database, scan: ScanState, at: string): Promise<Move> {
  return scan.status === 'received' || scan.status === 'failed' ? await move(db, scan, 'analyzed', 'result synced from another workstation', at) : stay(scan);
}

/** The analysis failed (or was given up after repeated crashes); a scan that moved on meanwhile keeps its status. */
export async function analysisFailed(db: Database, scan: ScanState, reason: string, at: string): Promise<Move> {
  return canSystemMove(scan.status, 'failed') ? await move(db, scan, 'failed', reason, at) : stay(scan);
}

/** A client set the scan to queued, but no job could be queued for it (no model takes it): it fails with why, rather than waiting for ever. */
export async function queueRequestUnmet(db: Database, scan: ScanState, reason: string, at: string): Promise<Move> {
  return scan.status === 'queued' ? await move(db, scan, 'failed', reason, at) : stay(scan);
}

/** The analysing process stopped (a clean shutdown or a crash found later): the job waits in the queue again. */
export async function analysisInterrupted(db: Database, scan: ScanState, reason: string, at: string): Promise<Move> {
  return scan.status === 'analyzing' ? await move(db, scan, 'queued', reason, at) : stay(scan);
}

/**
 * The analysis was cancelled, or the model does not apply: the scan goes back to where it was
 * before queuing - analyzed when an earlier result still stands, else received - with the reason.
 */
export async function analysisWithdrawn(db: Database, scan: ScanState & { hasResult: boolean }, reason: string, at: string): Promise<Move> {
  const target = scan.hasResult ? 'analyzed' : 'received';
  if ((scan.status === 'queued' || scan.status === 'analyzing') && canSystemMove(scan.status, target)) return await move(db, scan, target, reason, at);
  return stay(scan);
}

/**
 * A verdict on a finding of the scan's current result (or a reader-drawn finding): the first one
 * starts the review, one on the last open finding completes it, and clearing one reopens it, so
 * the worklist can tell which studies are read without anyone setting statuses by hand.
 */
export async function reviewChanged(db: Database, scan: ScanState, at: string): Promise<Move> {
  let current: ScanState = scan;
  const step = async (to: 'in_review' | 'reviewed', reason: string): Promise<void> => {
    await move(db, current, to, reason, at);
    current = { ref: scan.ref, status: to };
  };
  if (current.status === 'analyzed') await step('in_review', 'review of the AI findings started');
  const open = await countUnreviewedFindings(db, scan.ref);
  if (open === 0 && current.status === 'in_review') await step('reviewed', 'every AI finding accepted or rejected');
  else if (open > 0 && current.status === 'reviewed') await step('in_review', 'a finding verdict was cleared');
  return { from: scan.status, to: current.status, moved: current.status !== scan.status };
}

/** A report on the scan was signed: the scan is reported, from any reading state. */
export async function reportFinalized(db: Database, scan: ScanState, reportId: string, at: string): Promise<Move> {
  return canSystemMove(scan.status, 'reported') ? await move(db, scan, 'reported', `report ${reportId} finalized`, at) : stay(scan);
}

/**
 * Another workstation archived the scan (docs/sync.md, Scan status): archived here too, from any
 * state, as a client's request would; archived is where a scan's life ends.
 */
export async function archiveSynced(db: Database, scan: ScanState, at: string): Promise<Move> {
  return scan.status === 'archived' ? stay(scan) : await move(db, scan, 'archived', 'archived on another workstation', at);
}
