/**
 * This process as an owner of jobs (issue 12). Every mia process that opens the database - a
 * server node of a workstation or a hub, a CLI command - has a row in `nodes` while it runs: its
 * host, its pid and a heartbeat every few seconds. Jobs name their owner by that row, because a
 * pid names a process on one host only, and a hub's nodes run on several (in containers, often
 * all as pid 1). Whether an owner is gone is then decided in server/jobs/jobs.ts: on this host
 * by its pid, on another by its heartbeat.
 */
import { hostname } from 'node:os';
import type { Clock } from '#server/clock.ts';
import type { Database } from '#server/store/database.ts';
import { beatNode, deleteNode, insertNode, pruneNodes } from '#server/store/nodes.ts';

/** A node beats this often... */
export const NODE_HEARTBEAT_MS = 5_000;
/** ...and one on another host that has not for this long is gone: its jobs may be taken over. */
export const NODE_LEASE_MS = 30_000;
/** Rows of nodes silent this long are removed (their jobs were taken over long before). */
const NODE_PRUNE_MS = 24 * 60 * 60 * 1000;

export type JobKind = 'import' | 'analysis' | 'send' | 'retrieve';

export type JobNode = {
  readonly id: number;
  readonly host: string;
  readonly pid: number;
  /** Marks a job as run by this node until the returned release is called. */
  hold(kind: JobKind, id: number): () => void;
  /** True while this node runs the job: a row naming this node but not held here was released. */
  holds(kind: JobKind, id: number): boolean;
  /** Stops the heartbeat and removes the row: the process no longer owns anything. */
  stop(): Promise<void>;
};

/**
 * The host a node goes by among the hub's nodes: the machine's name, or MIA_NODE_HOST where
 * machines share one (and for tests that play several hosts on one machine).
 */
export function nodeHost(): string {
  return process.env['MIA_NODE_HOST'] ?? hostname();
}

export async function registerNode(db: Database, clock: Clock, options: { heartbeat: boolean } = { heartbeat: true }): Promise<JobNode> {
  const now = (): string => clock.now().toISOString();
  const host = nodeHost();
  let row = await insertNode(db, { host, pid: process.pid, at: now() });
  await pruneNodes(db, new Date(clock.now().getTime() - NODE_PRUNE_MS).toISOString()).catch(() => 0);
  let beating: Promise<unknown> = Promise.resolve();
  const timer = options.heartbeat
    ? setInterval(() => {
        beating = beatNode(db, row.id, now())
          .then(async (alive) => {
            // Pruned while this process was stalled for a day: come back under a new row (jobs
            // it held were taken over; the runners notice at their next conditional write).
            if (!alive) row = await insertNode(db, { host, pid: process.pid, at: now() });
          })
          .catch(() => undefined);
      }, NODE_HEARTBEAT_MS)
    : undefined;
  timer?.unref();
  let stopped: Promise<void> | undefined;
  const held: Record<JobKind, Set<number>> = { import: new Set(), analysis: new Set(), send: new Set(), retrieve: new Set() };
  return {
    hold(kind, id) {
      held[kind].add(id);
      return () => {
        held[kind].delete(id);
      };
    },
    holds: (kind, id) => held[kind].has(id),
    get id() {
      return row.id;
    },
    host,
    pid: process.pid,
    stop() {
      stopped ??= (async () => {
        clearInterval(timer);
        await beating;
        await deleteNode(db, row.id).catch(() => undefined);
      })();
      return stopped;
    },
  };
}
