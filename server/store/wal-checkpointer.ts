/**
 * WAL checkpoints for the server's SQLite file, on a worker thread (wal-checkpoint-worker.ts)
 * instead of inside whichever commit crossed SQLite's automatic threshold on the event loop.
 * Started with the server's runtime; a CLI command keeps SQLite's automatic checkpoints (its
 * commits are its own work, and it starts no threads).
 *
 * Every `intervalMs` the worker runs a PASSIVE checkpoint: it copies committed pages beside the
 * server's readers and writers. Under a steady write load (an audit commit every event-loop
 * turn) that alone never lets the WAL start over: SQLite rewinds it only when a writer finds
 * every frame copied, and a commit lands during nearly every checkpoint. So once the WAL holds
 * `maxFrames` frames, a second PASSIVE runs while this process's statements wait at the
 * connection's gate (asynchronously: the event loop keeps serving sockets); it has only the
 * frames since the first to copy, then finishes, and the next commit writes the WAL from its
 * start. The WAL file therefore stays near `maxFrames` pages. After `idleTicks` ticks without a
 * new frame, a TRUNCATE, also behind the gate, gives the file's space back.
 *
 * Durability is unchanged: commits still reach the WAL (and durable ones its fsync, sqlite.ts
 * syncWal) before they are answered; a checkpoint only copies what is already committed, fsyncs
 * the WAL before and the database file after, and a crash at any point leaves the WAL to be
 * replayed by the next open (sqlite.org/wal.html#checkpointing).
 */
import { Worker } from 'node:worker_threads';
import { workerBootstrap } from '#server/worker-threads.ts';
import type { Logger } from '#server/log.ts';
import type { SqliteDatabase } from '#server/store/sqlite.ts';
import type {
  CheckpointMode,
  CheckpointOutcome,
  CheckpointWorkerData,
  FromCheckpointWorker,
  ToCheckpointWorker,
} from '#server/store/wal-checkpoint-protocol.ts';

export type { CheckpointOutcome } from '#server/store/wal-checkpoint-protocol.ts';

export type WalCheckpointerOptions = {
  intervalMs?: number;
  /** The WAL's size, in pages, past which a checkpoint holds this process's statements back. */
  maxFrames?: number;
  /** Ticks without a new frame before the WAL file is emptied. */
  idleTicks?: number;
  log?: Pick<Logger, 'error'>;
};

export type WalCheckpointer = {
  /** One round now (the timer's work), resolving with the last checkpoint's outcome. */
  runOnce(): Promise<CheckpointOutcome>;
  /** Ends the timer and the worker, and gives SQLite's automatic checkpoints back to the connection. */
  stop(): Promise<void>;
};

const INTERVAL_MS = 250;
/** SQLite's own automatic threshold (wal_autocheckpoint's default): about 4 MB of 4 KiB pages. */
const MAX_FRAMES = 1000;
const IDLE_TICKS = 20;
const AUTOCHECKPOINT_DEFAULT = 1000;

type Pending = { resolve: (outcome: CheckpointOutcome) => void; reject: (err: Error) => void };

/**
 * Resolves once the worker's connection is open and the serving connection's automatic
 * checkpoints are off; rejects (automatic checkpoints still on) when the worker cannot start.
 */
export async function startWalCheckpointer(
  db: SqliteDatabase,
  { intervalMs = INTERVAL_MS, maxFrames = MAX_FRAMES, idleTicks = IDLE_TICKS, log }: WalCheckpointerOptions = {},
): Promise<WalCheckpointer> {
  const data: CheckpointWorkerData = { file: db.connection.name, nativeBinding: process.env['MIA_SQLITE_BINDING'] };
  const worker = new Worker(workerBootstrap(import.meta.url, 'wal-checkpoint-worker'), { eval: true, workerData: data });
  const pending = new Map<number, Pending>();
  let nextId = 1;
  let failure: Error | null = null;
  let closed: (() => void) | null = null;
  let stopped = false;

  const fail = (err: Error): void => {
    if (failure) return;
    failure = err;
    if (!stopped) log?.error('store.wal_checkpointer_failed', { error: err.message });
    for (const p of pending.values()) p.reject(err);
    pending.clear();
    // The worker is gone: the connection checkpoints for itself again rather than grow the WAL.
    if (db.connection.open) db.connection.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_DEFAULT}`);
  };

  await new Promise<void>((resolve, reject) => {
    let starting = true;
    worker.on('error', (err) => {
      if (starting) reject(err);
      fail(err);
    });
    worker.on('exit', (code) => {
      closed?.();
      const err = new Error(`WAL checkpoint worker exited (code ${code})`);
      if (starting) reject(err);
      fail(err);
    });
    worker.on('message', (message: FromCheckpointWorker) => {
      if (message.type === 'ready') {
        starting = false;
        resolve();
      } else if (message.type === 'closed') {
        closed?.();
      } else if (message.type === 'error' && message.id === 0) {
        reject(new Error(message.message));
      } else if (message.type === 'done' || message.type === 'error') {
        const p = pending.get(message.id);
        pending.delete(message.id);
        // Idle between rounds, it must not keep a process alive that has nothing else to do.
        if (pending.size === 0) worker.unref();
        if (message.type === 'done') p?.resolve(message.outcome);
        else p?.reject(new Error(message.message));
      }
    });
  }).catch(async (err: unknown) => {
    await worker.terminate();
    throw err;
  });
  worker.unref();
  db.connection.pragma('wal_autocheckpoint = 0');

  const checkpoint = (mode: CheckpointMode): Promise<CheckpointOutcome> => {
    if (failure) return Promise.reject(failure);
    const id = nextId++;
    return new Promise((resolve, reject) => {
      pending.set(id, { resolve, reject });
      worker.ref();
      worker.postMessage({ type: 'checkpoint', id, mode } satisfies ToCheckpointWorker);
    });
  };

  let lastFrames = -1;
  let quietTicks = 0;
  const round = async (): Promise<CheckpointOutcome> => {
    let outcome = await checkpoint('PASSIVE');
    if (outcome.frames >= maxFrames) {
      outcome = await db.holdStatements(() => checkpoint('PASSIVE'));
    }
    quietTicks = outcome.frames === lastFrames && outcome.frames > 0 ? quietTicks + 1 : 0;
    lastFrames = outcome.frames;
    if (quietTicks >= idleTicks) {
      outcome = await db.holdStatements(() => checkpoint('TRUNCATE'));
      quietTicks = 0;
      lastFrames = outcome.frames;
    }
    return outcome;
  };

  // Rounds run one after another, the timer's and runOnce's alike.
  let running: Promise<unknown> = Promise.resolve();
  const queueRound = (): Promise<CheckpointOutcome> => {
    const next = running.then(round);
    running = next.catch(() => undefined);
    return next;
  };
  const tick = (): void => {
    queueRound()
      .catch((err: unknown) => {
        log?.error('store.wal_checkpoint_failed', { error: err instanceof Error ? err.message : 'non-error' });
      })
      .finally(() => {
        if (!stopped && !failure) timer = setTimeout(tick, intervalMs).unref();
      });
  };
  let timer: NodeJS.Timeout | undefined = setTimeout(tick, intervalMs).unref();
  let stopping: Promise<void> | undefined;

  return {
    runOnce: queueRound,
    stop() {
      stopping ??= (async () => {
        stopped = true;
        clearTimeout(timer);
        timer = undefined;
        await running;
        if (!failure) {
          const exited = new Promise<void>((resolve) => {
            closed = resolve;
          });
          worker.ref();
          worker.postMessage({ type: 'close' } satisfies ToCheckpointWorker);
          await exited;
          await worker.terminate();
        }
        if (db.connection.open) db.connection.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_DEFAULT}`);
      })();
      return stopping;
    },
  };
}
