/**
 * Instance files as sync moves them (docs/sync.md, Transport): named by their SHA-256 and kept
 * in the content-addressed archive, so a file either side already holds is never sent again.
 * An uploaded file is streamed to a temporary name while it is hashed, and only a file whose
 * bytes hash to its name is made durable and renamed into place; anything else is removed and
 * refused, before the upload is acknowledged.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, fsync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { promisify } from 'node:util';
import { MiaError } from '#server/errors.ts';
import { archivePathFor, fsyncDir, STAGING_DIR } from '#server/imports/archive.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';

export const SHA256_PATTERN = /^[0-9a-f]{64}$/;
export const MAX_MISSING_QUERY = 1000;
const fsyncAsync = promisify(fsync);

export function hasBlob(dataDir: string, sha256: string): boolean {
  return existsSync(join(dataDir, archivePathFor(sha256)));
}

/** Which of these files this side lacks, in the order asked. */
export function missingBlobs(dataDir: string, hashes: readonly string[]): string[] {
  return [...new Set(hashes)].filter((h) => !hasBlob(dataDir, h));
}

export function blobPath(dataDir: string, sha256: string): string {
  return join(dataDir, archivePathFor(sha256));
}

/**
 * Stores a streamed file under its digest. Resolves with whether it was new; refuses (422) bytes
 * that do not hash to `sha256`, and (413) more than `maxBytes`, keeping nothing of either.
 */
export async function receiveBlob(dataDir: string, sha256: string, body: Readable, maxBytes: number): Promise<{ stored: boolean; bytes: number }> {
  const final = join(dataDir, archivePathFor(sha256));
  const staging = join(dataDir, STAGING_DIR);
  mkdirSync(staging, { recursive: true, mode: PRIVATE_DIR_MODE });
  // Named as the archive's temporary files are (with this pid), so a crash's leftover is cleared.
  const temp = join(staging, `.${sha256.slice(0, 16)}.${process.pid}.${randomBytes(4).readUInt32BE(0)}.tmp`);
  const hash = createHash('sha256');
  let bytes = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.byteLength;
      if (bytes > maxBytes) {
        done(new MiaError('too_large', 'File too large', `at most ${maxBytes} bytes per file`));
        return;
      }
      hash.update(chunk);
      done(null, chunk);
    },
  });
  try {
    await pipeline(body, meter, createWriteStream(temp, { flags: 'wx', mode: PRIVATE_FILE_MODE }));
    const actual = hash.digest('hex');
    if (actual !== sha256) throw new MiaError('unprocessable', 'File does not match its SHA-256', `received ${bytes} bytes hashing to ${actual}, not ${sha256}; send the file again`);
    if (bytes === 0) throw new MiaError('unprocessable', 'Empty file', 'an instance file has bytes');
    if (existsSync(final)) {
      rmSync(temp, { force: true });
      return { stored: false, bytes };
    }
    const handle = await open(temp, 'r');
    try {
      await fsyncAsync(handle.fd);
    } finally {
      await handle.close();
    }
    mkdirSync(dirname(final), { recursive: true, mode: PRIVATE_DIR_MODE });
    renameSync(temp, final);
    await fsyncDir(dirname(final));
    return { stored: true, bytes };
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
}

export function blobSize(dataDir: string, sha256: string): number | undefined {
  try {
    return statSync(blobPath(dataDir, sha256)).size;
  } catch {
    return undefined;
  }
}
