/**
 * Resumable uploads of large instance files (docs/sync.md, Transport): a workstation sends a file
 * in ranges (`Content-Range: bytes START-END/TOTAL`), the hub appends each range to a partial file
 * of that device and makes it durable before it answers, and a range cut off by the network is
 * sent again from where the hub's copy ends (`GET /v1/sync/blobs/{sha256}/upload` says where), not
 * from the start. The whole file is hashed once complete, and only a file whose bytes hash to its
 * name goes into the archive.
 *
 * Partial files live apart from the archive's staging folder, which a starting hub clears: a
 * partial upload survives a hub restart. One left behind (the device went away, or was revoked
 * and can never finish it) is removed after a week, when any device's next partial upload starts.
 */
import { createHash } from 'node:crypto';
import { createReadStream, createWriteStream, existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, utimesSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { conflict, invalid, MiaError } from '#server/errors.ts';
import { archivePathFor, fsyncDir } from '#server/imports/archive.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';
import { hasBlob } from '#server/sync/blobs.ts';

export const PARTIAL_DIR = join('sync', 'partial');
const PARTIAL_MAX_AGE_MS = 7 * 24 * 60 * 60 * 1000;

export type RangeHeader = { start: number; end: number; total: number };

/** Parses `bytes START-END/TOTAL`; undefined when absent, 400 when malformed or out of bounds. */
export function parseContentRange(header: string | undefined, maxTotal: number): RangeHeader | undefined {
  if (header === undefined) return undefined;
  const m = /^bytes (\d{1,15})-(\d{1,15})\/(\d{1,15})$/.exec(header.trim());
  if (!m) throw invalid('Invalid Content-Range', 'Content-Range: bytes START-END/TOTAL (END inclusive)');
  const [start, end, total] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (end < start || end >= total) throw invalid('Invalid Content-Range', `range ${start}-${end} does not fit a file of ${total} bytes`);
  if (total > maxTotal) throw new MiaError('too_large', 'File too large', `at most ${maxTotal} bytes per file`);
  return { start, end, total };
}

const partialPath = (dataDir: string, deviceId: string, sha256: string): string => join(dataDir, PARTIAL_DIR, `${deviceId}.${sha256}.part`);

/** How much of a file the hub holds from this device: all of it once it is in the archive. */
export function uploadOffset(dataDir: string, deviceId: string, sha256: string): { received: number; complete: boolean } {
  if (hasBlob(dataDir, sha256)) return { received: statSync(join(dataDir, archivePathFor(sha256))).size, complete: true };
  const partial = partialPath(dataDir, deviceId, sha256);
  return { received: existsSync(partial) ? statSync(partial).size : 0, complete: false };
}

/** Partials this process is appending to: never stale, however old their last range. */
const writing = new Set<string>();

/**
 * Every device's, not only the uploader's: a revoked device's partials would otherwise stay for
 * good. A partial being resumed is skipped here and touched when its range starts, so another
 * node sharing the folder sees it as fresh.
 */
function removeStalePartials(dir: string, now: number): void {
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.part')) continue;
    const path = join(dir, name);
    if (writing.has(path)) continue;
    try {
      if (now - statSync(path).mtimeMs > PARTIAL_MAX_AGE_MS) rmSync(path, { force: true });
    } catch {
      // Gone meanwhile.
    }
  }
}

async function fsyncFile(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function hashFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/** Appends one range; completes the file when it was the last. */
export async function receiveRange(
  dataDir: string,
  deviceId: string,
  sha256: string,
  body: Readable,
  range: RangeHeader,
): Promise<{ received: number; complete: boolean; stored: boolean }> {
  if (hasBlob(dataDir, sha256)) {
    body.resume();
    return { received: range.total, complete: true, stored: false };
  }
  const dir = join(dataDir, PARTIAL_DIR);
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const partial = partialPath(dataDir, deviceId, sha256);
  if (writing.has(partial)) {
    body.resume();
    throw conflict('This file is being received', `another range of it is arriving now; ask where the copy ends (GET /v1/sync/blobs/${sha256}/upload) once that one is answered`);
  }
  writing.add(partial);
  try {
    return await appendRange(dataDir, sha256, partial, dir, body, range);
  } finally {
    writing.delete(partial);
  }
}

async function appendRange(dataDir: string, sha256: string, partial: string, dir: string, body: Readable, range: RangeHeader): Promise<{ received: number; complete: boolean; stored: boolean }> {
  try {
    const now = new Date();
    utimesSync(partial, now, now);
  } catch {
    // None held yet, or removed meanwhile: the range below finds none held.
  }
  const held = existsSync(partial) ? statSync(partial).size : 0;
  if (range.start !== held) {
    body.resume();
    throw conflict('This range does not continue the upload', `the hub holds ${held} bytes of this file; send from byte ${held} (GET /v1/sync/blobs/${sha256}/upload)`);
  }
  if (held === 0) removeStalePartials(dir, Date.now());
  const expected = range.end - range.start + 1;
  let bytes = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      bytes += chunk.byteLength;
      if (bytes > expected) done(invalid('Range longer than its Content-Range', `the range ${range.start}-${range.end} is ${expected} bytes`));
      else done(null, chunk);
    },
  });
  try {
    await pipeline(body, meter, createWriteStream(partial, { flags: 'a', mode: PRIVATE_FILE_MODE }));
  } finally {
    // What arrived stays (a range cut off is resumed from here), and is durable before the answer.
    if (existsSync(partial)) await fsyncFile(partial);
  }
  const size = statSync(partial).size;
  if (bytes !== expected) {
    // Shorter than it said: keep what came, and say where to go on from.
    throw invalid('Range shorter than its Content-Range', `received ${bytes} of ${expected} bytes; the hub holds ${size}, send from byte ${size}`);
  }
  if (size < range.total) return { received: size, complete: false, stored: false };
  const actual = await hashFile(partial);
  if (actual !== sha256) {
    rmSync(partial, { force: true });
    throw new MiaError('unprocessable', 'File does not match its SHA-256', `the ${size} bytes received hash to ${actual}, not ${sha256}; send the file again from byte 0`);
  }
  const final = join(dataDir, archivePathFor(sha256));
  mkdirSync(dirname(final), { recursive: true, mode: PRIVATE_DIR_MODE });
  renameSync(partial, final);
  await fsyncDir(dirname(final));
  return { received: size, complete: true, stored: true };
}
