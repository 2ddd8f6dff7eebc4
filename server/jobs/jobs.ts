/**
 * Who runs a job (issue 12): claiming, ownership and abandonment for every job kind, once.
 *
 * A job row names its owner - the node (server/jobs/node.ts) of the process running it, and
 * that process's pid - and when the owner last showed life (heartbeat_at). A job is taken only
 * by a conditional UPDATE that succeeds for one node alone (the store's claim statements; on
 * PostgreSQL the queue is read with FOR UPDATE SKIP LOCKED, so nodes claiming at once skip each
 * other's rows instead of queueing on them), and every later write of the runner is conditional
 * on still being the owner, so a job taken over can never be finished twice.
 *
 * A job's owner is gone when its node row is gone (a clean stop removes it), when the node is on
 * this host and its pid is not alive or has been silent for STALE_HEARTBEAT_MS (a pid reused by
 * another program), or when the node is on another host and has not beaten for NODE_LEASE_MS.
 * Imports and analyses used to carry their own copies of these rules; the architecture test
 * keeps claims here.
 */
import type { Database } from '#server/store/database.ts';
import { claimNextQueuedAnalysis, claimQueuedAnalysis, type AnalysisJobRow, type JobOwner } from '#server/store/analysis-jobs.ts';

export type { JobOwner, SeenOwner } from '#server/store/analysis-jobs.ts';
import { reclaimImportJob } from '#server/store/import-jobs.ts';
import { claimNextDueSend, type SendJobRow } from '#server/store/routing.ts';
import { findNode } from '#server/store/nodes.ts';
import { NODE_LEASE_MS, type JobKind, type JobNode } from '#server/jobs/node.ts';

export type { JobKind } from '#server/jobs/node.ts';

/** A heartbeat this old means the owner is gone even if its pid was reused. */
export const STALE_HEARTBEAT_MS = 10 * 60 * 1000;

/** The job's row as far as ownership goes. */
export type Owned = { id: number; owner_node: number | null; owner_pid: number | null; heartbeat_at: string | null };


export function ownerOf(node: JobNode): JobOwner {
  return { node: node.id, pid: node.pid };
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

function silentFor(heartbeatAt: string | null, nowMs: number): number {
  return nowMs - (heartbeatAt ? Date.parse(heartbeatAt) : 0);
}

/** True when nobody is running this job any more, so another process may take it over. */
export async function isAbandoned(db: Database, me: JobNode, kind: JobKind, job: Owned, nowMs: number): Promise<boolean> {
  if (me.holds(kind, job.id)) return false;
  if (job.owner_node === null) {
    // Rows of a mia before nodes (or released ones): the owner was a process on this host.
    if (job.owner_pid === null || job.owner_pid === process.pid) return true;
    if (!pidAlive(job.owner_pid)) return true;
    return silentFor(job.heartbeat_at, nowMs) > STALE_HEARTBEAT_MS;
  }
  // Ours but not held: released, or left by a runner of this process that is gone.
  if (job.owner_node === me.id) return true;
  const owner = await findNode(db, job.owner_node);
  if (!owner) return true;
  if (owner.host === me.host) {
    if (!pidAlive(owner.pid)) return true;
    return silentFor(owner.heartbeat_at, nowMs) > STALE_HEARTBEAT_MS;
  }
  return silentFor(owner.heartbeat_at, nowMs) > NODE_LEASE_MS;
}

/** Takes a queued analysis for this node; undefined when another node was quicker. */
export async function claimAnalysis(db: Database, me: JobNode, id: number, at: string): Promise<AnalysisJobRow | undefined> {
  return await claimQueuedAnalysis(db, id, ownerOf(me), at);
}

/** Takes the oldest queued analysis no other node holds; undefined when the queue is empty. */
export async function claimNextAnalysis(db: Database, me: JobNode, at: string): Promise<AnalysisJobRow | undefined> {
  return await claimNextQueuedAnalysis(db, ownerOf(me), at);
}

/** Takes over an interrupted import for this node; false when another node was quicker. */
export async function claimImport(db: Database, me: JobNode, id: number, at: string): Promise<boolean> {
  return await reclaimImportJob(db, id, ownerOf(me), at);
}

/** Takes the send job due first (queued, or failed with its next attempt due) for this node. */
export async function claimNextSend(db: Database, me: JobNode, at: string): Promise<SendJobRow | undefined> {
  return await claimNextDueSend(db, ownerOf(me), at);
}
