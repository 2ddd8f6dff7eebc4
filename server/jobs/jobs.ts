/**
 * Who runs a job (issue 12): claiming, ownership and abandonment for every job kind, once.
 *
 * A job row names its owner (owner_pid) and when the owner last showed life (heartbeat_at).
 * A job is taken only by a conditional UPDATE that succeeds for one process alone (the store's
 * claim statements; on PostgreSQL the same door becomes FOR UPDATE SKIP LOCKED), and a job whose
 * owner died - its pid gone, or silent for longer than STALE_HEARTBEAT_MS, which also covers a
 * pid reused by another program - is abandoned and may be taken over. Imports and analyses used
 * to carry their own copies of these rules; the architecture test keeps claims here.
 */
import type { Database } from '#server/store/database.ts';
import { claimQueuedAnalysis, type AnalysisJobRow } from '#server/store/analysis-jobs.ts';
import { reclaimImportJob } from '#server/store/import-jobs.ts';

export type JobKind = 'import' | 'analysis';

/** A heartbeat this old means the owner is gone even if its pid was reused. */
export const STALE_HEARTBEAT_MS = 10 * 60 * 1000;

/** The job's row as far as ownership goes. */
export type Owned = { id: number; owner_pid: number | null; heartbeat_at: string | null };

/** Jobs this process runs now, per kind: a row naming our own pid but not held here was left by an earlier process that had our pid. */
const held: Record<JobKind, Set<number>> = { import: new Set(), analysis: new Set() };

/** Marks a job as run by this process until the returned release is called. */
export function holdJob(kind: JobKind, id: number): () => void {
  held[kind].add(id);
  return () => {
    held[kind].delete(id);
  };
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists but belongs to someone else.
    return typeof err === 'object' && err !== null && 'code' in err && err.code === 'EPERM';
  }
}

/** True when nobody is running this job any more, so another process may take it over. */
export function isAbandoned(kind: JobKind, job: Owned, nowMs: number): boolean {
  if (held[kind].has(job.id)) return false;
  // Our pid but not held here: a process before us had it (pids are reused after a restart).
  if (job.owner_pid === null || job.owner_pid === process.pid) return true;
  if (!pidAlive(job.owner_pid)) return true;
  const beat = job.heartbeat_at ? Date.parse(job.heartbeat_at) : 0;
  return nowMs - beat > STALE_HEARTBEAT_MS;
}

/** Takes a queued analysis for this process; undefined when another process was quicker. */
export function claimAnalysis(db: Database, id: number, at: string): AnalysisJobRow | undefined {
  return claimQueuedAnalysis(db, id, process.pid, at);
}

/** Takes over an interrupted import for this process; false when another process was quicker. */
export function claimImport(db: Database, id: number, at: string): boolean {
  return reclaimImportJob(db, id, process.pid, at);
}
