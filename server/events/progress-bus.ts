/**
 * Job progress for whoever follows a job (the SSE streams, the CLI's progress bar), wherever it
 * runs (issue 12): a job's runner publishes each step; followers on this node hear it at once,
 * and on a hub every other node hears it through PostgreSQL's LISTEN/NOTIFY, so a client whose
 * request lands on any node sees the job move as it moves. Followers still read the job's row
 * (its status, its end): the bus only tells them when to look.
 */
import { z } from 'zod';
import type { Logger } from '#server/log.ts';
import type { Database } from '#server/store/database.ts';
import { listen, notify } from '#server/store/notifications.ts';
import type { PostgresDatabase } from '#server/store/postgres.ts';

export type ProgressKind = 'analysis' | 'import';
export type Progress = { kind: ProgressKind; id: number; done: number; total: number | null };

export type ProgressBus = {
  publish(progress: Progress): void;
  subscribe(kind: ProgressKind, id: number, listener: (progress: Progress) => void): () => void;
  /** Stops listening to other nodes. */
  stop(): Promise<void>;
};

const CHANNEL = 'mia_progress';

const wire = z.object({
  node: z.number(),
  kind: z.enum(['analysis', 'import']),
  id: z.number(),
  done: z.number(),
  total: z.number().nullable(),
});

export async function createProgressBus(db: Database, nodeId: number, log: Logger): Promise<ProgressBus> {
  const listeners = new Map<string, Set<(progress: Progress) => void>>();
  const keyOf = (kind: ProgressKind, id: number): string => `${kind}:${id}`;
  const dispatch = (progress: Progress): void => {
    for (const listener of listeners.get(keyOf(progress.kind, progress.id)) ?? []) listener(progress);
  };

  let stopListening: (() => Promise<void>) | undefined;
  if (db.dialect === 'postgres') {
    stopListening = await listen(db as PostgresDatabase, CHANNEL, (payload) => {
      // Any role of the database may NOTIFY on the channel: what does not parse is dropped, not thrown.
      let message: unknown;
      try {
        message = JSON.parse(payload);
      } catch {
        return;
      }
      const parsed = wire.safeParse(message);
      // Our own notifications were dispatched when published.
      if (parsed.success && parsed.data.node !== nodeId) dispatch(parsed.data);
    });
  }

  return {
    publish(progress) {
      dispatch(progress);
      // Only other nodes' followers need the database, and only when someone may listen.
      if (db.dialect !== 'postgres') return;
      notify(db as PostgresDatabase, CHANNEL, JSON.stringify({ node: nodeId, ...progress })).catch((err: unknown) => {
        log.error('progress.notify_failed', { error: err instanceof Error ? err.name : 'non-error' });
      });
    },
    subscribe(kind, id, listener) {
      const key = keyOf(kind, id);
      const set = listeners.get(key) ?? new Set();
      set.add(listener);
      listeners.set(key, set);
      return () => {
        set.delete(listener);
        if (set.size === 0) listeners.delete(key);
      };
    },
    async stop() {
      await stopListening?.();
    },
  };
}
