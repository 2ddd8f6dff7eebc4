/**
 * Operational log: one JSON line per event in <data>/logs/mia.log. Callers pass only technical
 * fields (route pattern, status, request id, key id); never a key, a query string or a patient
 * value, which is why there is no free-form "log this object" entry point.
 *
 * Logging never takes mia down and never holds a request up: lines are queued and appended
 * asynchronously, a batch at a time. When the file cannot be opened or written (a full disk, a
 * failing one) the batch is dropped and counted, writing is tried again `retryMs` later, and
 * the first line written after the gap says how many lines were lost since when. The file
 * rotates by size (mia.log -> mia.log.1 -> ... -> mia.log.<keep>) between two batches, so no
 * line is lost to a rotation; each new file gets the private mode.
 */
import type { FileHandle } from 'node:fs/promises';
import { mkdir, open, rename, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';

export type LogFields = Record<string, string | number | boolean | null>;
export type Logger = {
  info(event: string, fields?: LogFields): void;
  error(event: string, fields?: LogFields): void;
  /** Resolves once every line logged so far is written or counted as dropped. */
  flush(): Promise<void>;
  /** Flushes, then closes the file; later lines are ignored. */
  close(): Promise<void>;
};

export const logRotationSchema = z.object({
  /** mia.log is rotated once it reaches this size. */
  maxBytes: z.number().int().min(4096),
  /** Rotated files kept besides mia.log (mia.log.1 the newest); older ones are deleted. */
  keep: z.number().int().min(1).max(100),
});
export type LogRotation = z.infer<typeof logRotationSchema>;
export const DEFAULT_LOG_ROTATION: LogRotation = { maxBytes: 10 * 1024 ** 2, keep: 5 };

export type FileLoggerOptions = {
  rotation?: LogRotation;
  /** After a failed open or write, lines are dropped (and counted) this long before a retry. */
  retryMs?: number;
  /** The folder of the log files; default <data>/logs. A hub's nodes share the data folder but
   * each keeps its own log (one file rotated by several processes would lose lines). */
  dir?: string | null;
};

export const LOG_FILE = 'mia.log';
/** Lines waiting for a slow disk are held up to this size; beyond it they are dropped, counted. */
const MAX_QUEUED_BYTES = 4 * 1024 ** 2;
const NEWLINE = 0x0a;

function errorCode(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string') return error.code;
  return error instanceof Error ? error.name : 'unknown';
}

/** A closed terminal or pipe on stderr emits 'error', which unhandled would end the process. */
let stderrGuarded = false;
function guardStderr(): void {
  if (stderrGuarded) return;
  stderrGuarded = true;
  process.stderr.on('error', () => undefined);
}

/** Appends all of `bytes`; a write may stop part way, so on failure it says how far it got. */
async function appendAll(file: FileHandle, bytes: Buffer): Promise<{ written: number; error?: unknown }> {
  let written = 0;
  try {
    while (written < bytes.length) written += (await file.write(bytes, written)).bytesWritten;
    return { written };
  } catch (error) {
    return { written, error };
  }
}

function countLines(bytes: Buffer): number {
  let lines = 0;
  for (let i = bytes.indexOf(NEWLINE); i >= 0; i = bytes.indexOf(NEWLINE, i + 1)) lines += 1;
  return lines;
}

export function createFileLogger(dataDir: string, alsoStderr: boolean, options: FileLoggerOptions = {}): Logger {
  const rotation = logRotationSchema.parse(options.rotation ?? DEFAULT_LOG_ROTATION);
  const retryMs = options.retryMs ?? 1000;
  const dir = options.dir ?? join(dataDir, 'logs');
  const path = join(dir, LOG_FILE);
  if (alsoStderr) guardStderr();

  let queue: string[] = [];
  let queuedBytes = 0;
  let file: { handle: FileHandle; ino: number } | null = null;
  let retryAt = 0;
  /** Lines lost since the last one written, from when, and the last error's code. */
  let gap: { dropped: number; since: string; error: string } | null = null;
  /** A failed write left a partial line in the file: the next write ends it first. */
  let lineCut = false;
  let draining: Promise<void> | null = null;
  let closed = false;

  const drop = (lines: number, error: string): void => {
    if (lines <= 0) return;
    gap = { dropped: (gap?.dropped ?? 0) + lines, since: gap?.since ?? new Date().toISOString(), error };
  };

  const closeFile = async (): Promise<void> => {
    const current = file;
    file = null;
    await current?.handle.close().catch(() => undefined);
  };

  // Opening creates the folder and file if needed: nothing is created at start, so a full disk
  // (or a logs folder that cannot be made) does not keep mia from starting.
  const openFile = async (): Promise<{ handle: FileHandle; ino: number }> => {
    await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
    // a+: appends, and can read the last byte: a process that stopped mid-line (a full disk,
    // a kill) left the file without its final newline, and the next line must not join it.
    const handle = await open(path, 'a+', PRIVATE_FILE_MODE);
    try {
      const { ino, size } = await handle.stat();
      const last = Buffer.from([NEWLINE]);
      if (size > 0) await handle.read(last, 0, 1, size - 1);
      lineCut = last[0] !== NEWLINE;
      return { handle, ino };
    } catch (error) {
      await handle.close().catch(() => undefined);
      throw error;
    }
  };

  /** After a batch: follow a rotation made by another mia process (a CLI command), or rotate. */
  const rotateIfDue = async (): Promise<void> => {
    const current = await stat(path).catch(() => null);
    if (current?.ino !== file?.ino) {
      await closeFile();
      return;
    }
    if (current === null || current.size < rotation.maxBytes) return;
    await closeFile();
    for (let n = rotation.keep - 1; n >= 1; n -= 1) {
      await rename(`${path}.${n}`, `${path}.${n + 1}`).catch(() => undefined);
    }
    await rename(path, `${path}.1`);
  };

  const writeBatch = async (lines: string[]): Promise<void> => {
    if (Date.now() < retryAt) {
      drop(lines.length, gap?.error ?? 'retry pending');
      return;
    }
    try {
      file ??= await openFile();
    } catch (error) {
      drop(lines.length, errorCode(error));
      retryAt = Date.now() + retryMs;
      return;
    }
    const note = gap ? JSON.stringify({ at: new Date().toISOString(), level: 'error', event: 'log.gap', ...gap }) + '\n' : '';
    const prefix = lineCut ? '\n' : '';
    const bytes = Buffer.from(prefix + note + lines.join(''));
    const result = await appendAll(file.handle, bytes);
    if (result.error === undefined) {
      gap = null;
      lineCut = false;
      await rotateIfDue().catch(() => closeFile());
      return;
    }
    // What made it: whole lines count as written, a cut one is ended by the next write.
    if (result.written > 0) lineCut = bytes[result.written - 1] !== NEWLINE;
    let complete = countLines(bytes.subarray(prefix.length, Math.max(prefix.length, result.written)));
    if (note && complete > 0) {
      gap = null;
      complete -= 1;
    }
    drop(lines.length - complete, errorCode(result.error));
    retryAt = Date.now() + retryMs;
    await closeFile();
  };

  const drain = async (): Promise<void> => {
    while (queue.length > 0) {
      const lines = queue;
      queue = [];
      queuedBytes = 0;
      await writeBatch(lines).catch((error: unknown) => drop(lines.length, errorCode(error)));
    }
  };

  const schedule = (): void => {
    draining ??= drain().finally(() => {
      draining = null;
      // A line queued after the loop's last look and before this callback.
      if (queue.length > 0) schedule();
    });
  };

  const write = (level: string, event: string, fields: LogFields = {}): void => {
    if (closed) return;
    const line = JSON.stringify({ at: new Date().toISOString(), level, event, ...fields }) + '\n';
    if (alsoStderr) process.stderr.write(line);
    if (queuedBytes + line.length > MAX_QUEUED_BYTES) {
      drop(1, 'queue full');
      return;
    }
    queue.push(line);
    queuedBytes += line.length;
    schedule();
  };

  return {
    info: (event, fields) => write('info', event, fields),
    error: (event, fields) => write('error', event, fields),
    async flush() {
      while (draining) await draining;
    },
    async close() {
      closed = true;
      while (draining) await draining;
      // Lines lost and nothing logged since: one last try to say so before the file closes.
      if (gap) {
        retryAt = 0;
        await writeBatch([]).catch(() => undefined);
      }
      await closeFile();
    },
  };
}
