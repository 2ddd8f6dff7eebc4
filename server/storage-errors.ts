/**
 * A full or failing disk under the data folder, as the file system (ENOSPC, EIO...) or SQLite
 * (SQLITE_FULL, SQLITE_IOERR_*; better-sqlite3's SqliteError carries them as `code`) reports
 * it, turned into the MiaError a client and an operator can act on. Any write may meet these
 * (archive staging, uploads, exports, every database write), so they are recognised here once,
 * where errors reach the HTTP edge and where a job records why it failed, not at each write.
 *
 * - No space (ENOSPC, EDQUOT, SQLITE_FULL, and SQLITE_IOERR_SHMSIZE, which is SQLite failing to
 *   grow its shared-memory file: "usually because the disk is full", sqlite.org/rescode.html):
 *   507 Insufficient Storage (RFC 4918, 11.5). Nothing partly written becomes visible (archive
 *   files and exports are renamed into place, database writes roll back), and the same request
 *   succeeds once space is freed, without a restart.
 * - Any other I/O error (EIO, EROFS, SQLITE_IOERR_*, ENOENT from mkdir): 503, named, not a
 *   bare 500. It is not a fault of the request nor a bug of mia, and a write failure is no more
 *   "insufficient storage" than a read failure is: the disk needs an operator.
 */
import { MiaError } from '#server/errors.ts';

// PostgreSQL's SQLSTATEs on a hub: 53100 disk_full, 58030 io_error.
const NO_SPACE = new Set(['ENOSPC', 'EDQUOT', 'SQLITE_FULL', 'SQLITE_IOERR_SHMSIZE', '53100']);
const FILE_SYSTEM_FAILURE = new Set(['EIO', 'EROFS', '58030']);
/** A hub's PostgreSQL that cannot be reached or is shutting down (57P01-03, class 08). */
const DATABASE_UNAVAILABLE = /^(57P0[123]|08\d\d\d)$/;

/** The system or SQLite error code of `error` (ENOSPC, SQLITE_FULL), if it has one. */
export function codeOf(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  if ('code' in error && typeof error.code === 'string') return error.code;
  // A wrapper (e.g. a stream's error) may carry the system error as its cause.
  return 'cause' in error && error.cause !== error ? codeOf(error.cause) : undefined;
}

/** The storage failure behind `error` as a MiaError, or undefined when it is not one. */
export function storageErrorOf(error: unknown): MiaError | undefined {
  if (error instanceof MiaError) return undefined;
  const code = codeOf(error);
  if (code === undefined) return undefined;
  if (NO_SPACE.has(code)) {
    return new MiaError('insufficient_storage', 'The disk holding the data folder is full', `${code}: free space on it or raise the quota, then retry`);
  }
  // A refused connection is the database's only when connecting to it: a client that hangs up
  // mid-upload (ECONNRESET) is no storage failure.
  const refusedConnect = code === 'ECONNREFUSED' && typeof error === 'object' && error !== null && 'syscall' in error && error.syscall === 'connect';
  if (DATABASE_UNAVAILABLE.test(code) || refusedConnect) {
    return new MiaError('storage_failure', 'The database is unavailable', `${code}: the request did not complete; retry when the database is back`);
  }
  // mkdir -p only fails with ENOENT when the file system cannot find its own folders: Node
  // reports the first error of the walk up, and a failing disk answers the lookups with ENOENT
  // before the mkdir that says EIO. (A data folder on a disk that is gone looks the same.)
  const mkdirLost = code === 'ENOENT' && typeof error === 'object' && error !== null && 'syscall' in error && error.syscall === 'mkdir';
  if (FILE_SYSTEM_FAILURE.has(code) || code.startsWith('SQLITE_IOERR') || mkdirLost) {
    return new MiaError('storage_failure', 'The disk holding the data folder reported an I/O error', `${code}: the request did not complete; the disk needs checking`);
  }
  return undefined;
}

/** One line saying why an operation failed, for a job's recorded reason: the cause first. */
export function failureReason(error: unknown, fallback: string): string {
  const storage = storageErrorOf(error);
  if (storage) return `${storage.message} (${storage.details ?? ''})`;
  return error instanceof Error ? error.message.slice(0, 300) : fallback;
}
