/**
 * Worker thread entry: a second connection to the workstation's SQLite file that runs WAL
 * checkpoints when wal-checkpointer.ts asks. A checkpoint copies pages from the WAL into the
 * database file and fsyncs it; run by SQLite's automatic checkpoint it happened inside whichever
 * commit crossed 1,000 pages, on the server's event loop (3,000 audit commits: stalls over 5 ms
 * summed 1,930 ms with it, 676 ms without). Here it holds this thread only.
 */
import { parentPort, workerData } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import type { CheckpointMode, CheckpointOutcome, CheckpointWorkerData, FromCheckpointWorker, ToCheckpointWorker } from '#server/store/wal-checkpoint-protocol.ts';

if (!parentPort) throw new Error('wal-checkpoint-worker.ts runs as a worker thread');
const port = parentPort;
const { file, nativeBinding } = workerData as CheckpointWorkerData;
const post = (message: FromCheckpointWorker): void => port.postMessage(message);

let db: BetterSqlite3.Database;
try {
  db = new BetterSqlite3(file, nativeBinding ? { nativeBinding, fileMustExist: true } : { fileMustExist: true });
  // The checkpoint's own syncs (the WAL before copying, the database file after) follow this
  // connection's setting; NORMAL keeps them, as on the serving connection.
  db.pragma('synchronous = NORMAL');
  // TRUNCATE waits for other processes' readers (a CLI command) through this; this thread may
  // wait, but not long: the server holds its own statements back meanwhile.
  db.pragma('busy_timeout = 200');
  post({ type: 'ready' });
} catch (err) {
  post({ type: 'error', id: 0, message: err instanceof Error ? err.message : String(err) });
  process.exit(1);
}

function checkpoint(mode: CheckpointMode): CheckpointOutcome {
  const [row] = db.pragma(`wal_checkpoint(${mode})`) as Array<{ busy: number; log: number; checkpointed: number }>;
  return { busy: row?.busy === 1, frames: row?.log ?? 0, copied: row?.checkpointed ?? 0 };
}

port.on('message', (message: ToCheckpointWorker) => {
  if (message.type === 'close') {
    db.close();
    post({ type: 'closed' });
    port.close();
    return;
  }
  try {
    post({ type: 'done', id: message.id, outcome: checkpoint(message.mode) });
  } catch (err) {
    post({ type: 'error', id: message.id, message: err instanceof Error ? err.message : String(err) });
  }
});
