/** Messages between the WAL checkpointer (wal-checkpointer.ts) and its worker thread. */

/** PASSIVE copies what it can beside readers and writers; TRUNCATE also empties the WAL file. */
export type CheckpointMode = 'PASSIVE' | 'TRUNCATE';

export type CheckpointWorkerData = { file: string; nativeBinding: string | undefined };

/** What `PRAGMA wal_checkpoint` answers (sqlite.org/pragma.html#pragma_wal_checkpoint). */
export type CheckpointOutcome = {
  /** The checkpoint could not finish: a writer or reader of another connection was in the way. */
  busy: boolean;
  /** Frames in the WAL now. */
  frames: number;
  /** Frames of those already copied into the database file. */
  copied: number;
};

export type ToCheckpointWorker = { type: 'checkpoint'; id: number; mode: CheckpointMode } | { type: 'close' };

export type FromCheckpointWorker =
  | { type: 'ready' }
  | { type: 'done'; id: number; outcome: CheckpointOutcome }
  | { type: 'error'; id: number; message: string }
  | { type: 'closed' };
