/** Which errors are a full or failing disk, on real error objects (a write to /dev/full, SqliteError). */
import { writeFileSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { MiaError } from '#server/errors.ts';
import { failureReason, storageErrorOf } from '#server/storage-errors.ts';

function thrownBy(work: () => void): unknown {
  try {
    work();
  } catch (error) {
    return error;
  }
  throw new Error('expected a throw');
}

const systemError = (code: string): NodeJS.ErrnoException => Object.assign(new Error(`${code}: test`), { code });

describe('storage errors', () => {
  it('a full disk is insufficient_storage, whichever layer reports it', () => {
    const enospc = thrownBy(() => writeFileSync('/dev/full', 'x'));
    expect(storageErrorOf(enospc)).toMatchObject({ kind: 'insufficient_storage', details: expect.stringMatching(/^ENOSPC: /) });
    for (const code of ['EDQUOT', 'SQLITE_FULL', 'SQLITE_IOERR_SHMSIZE']) {
      const error = code.startsWith('SQLITE') ? new BetterSqlite3.SqliteError('database or disk is full', code) : systemError(code);
      expect(storageErrorOf(error)?.kind, code).toBe('insufficient_storage');
    }
    // A hub's PostgreSQL out of disk (SQLSTATE 53100), as pg reports it.
    expect(storageErrorOf(Object.assign(new pg.DatabaseError('could not extend file: No space left on device', 0, 'error'), { code: '53100' }))?.kind).toBe('insufficient_storage');
    // Wrapped, as a stream or a library may pass it on.
    expect(storageErrorOf(new Error('upload failed', { cause: enospc }))?.kind).toBe('insufficient_storage');
  });

  it('an I/O error is storage_failure; other errors are not storage errors', () => {
    const pgError = (code: string): Error => Object.assign(new pg.DatabaseError('test', 0, 'error'), { code });
    for (const error of [systemError('EIO'), systemError('EROFS'), new BetterSqlite3.SqliteError('disk I/O error', 'SQLITE_IOERR_READ'), pgError('58030'), pgError('57P01')]) {
      expect(storageErrorOf(error)?.kind).toBe('storage_failure');
    }
    // A folder mkdir -p cannot make: the disk under the data folder fails or is gone.
    // (As Node reports it: a real one needs a failing disk, test/faults/io-error.test.ts.)
    const lost = Object.assign(systemError('ENOENT'), { syscall: 'mkdir', path: '/data/exports' });
    expect(storageErrorOf(lost)).toMatchObject({ kind: 'storage_failure', details: expect.stringMatching(/^ENOENT: /) });
    // A client that hangs up mid-upload is no storage failure; a refused connection to PostgreSQL is.
    expect(storageErrorOf(Object.assign(systemError('ECONNREFUSED'), { syscall: 'connect' }))?.kind).toBe('storage_failure');
    for (const error of [systemError('ECONNRESET'), systemError('EACCES'), systemError('ENOENT'), new BetterSqlite3.SqliteError('constraint', 'SQLITE_CONSTRAINT_UNIQUE'), new Error('x'), 'text', null]) {
      expect(storageErrorOf(error)).toBeUndefined();
    }
    expect(storageErrorOf(new MiaError('conflict', 'no'))).toBeUndefined();
  });

  it('a job records the cause first', () => {
    expect(failureReason(systemError('ENOSPC'), 'failed')).toBe('The disk holding the data folder is full (ENOSPC: free space on it or raise the quota, then retry)');
    expect(failureReason(new Error('source vanished'), 'failed')).toBe('source vanished');
    expect(failureReason(42, 'failed')).toBe('failed');
  });
});
