/**
 * Instance files as sync moves them (docs/sync.md, Transport): named by their SHA-256 and kept
 * in the content-addressed archive, so a file either side already holds is never sent again.
 * An uploaded file is streamed to a temporary name while it is hashed, and only a file whose
 * bytes hash to its name is made durable and renamed into place; anything else is removed and
 * refused, before the upload is acknowledged.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, fsync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import { promisify } from 'node:util';
import { MiaError } from '#server/errors.ts';
import { archivePathFor, createArchiveWriter, fsyncDir, STAGING_DIR } from '#server/imports/archive.ts';
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

/**
 * A bucket: many small files in one request, so their fsyncs run together (one journal commit
 * for the lot, as an import's batch) instead of one request and two fsyncs per 33 KiB file. The
 * body is, per file: its SHA-256 (32 bytes), its length (4 bytes, big-endian), its bytes. Every
 * file is checked against its digest before any is kept; one that does not match refuses the
 * whole bucket, so a caller never has to work out which of its files went in.
 */
export const BUCKET_TYPE = 'application/vnd.mia.blob-bucket';
export const BUCKET_MAX_BYTES = 32 * 1024 * 1024;
export const BUCKET_MAX_FILES = 1000;
/** Larger files go one by one (PUT), streamed. */
export const BUCKET_FILE_MAX = 4 * 1024 * 1024;
const FRAME_HEAD = 36;

export function encodeBucket(files: readonly { sha256: string; bytes: Uint8Array }[]): Buffer {
  const parts: Buffer[] = [];
  for (const f of files) {
    const head = Buffer.alloc(FRAME_HEAD);
    Buffer.from(f.sha256, 'hex').copy(head, 0);
    head.writeUInt32BE(f.bytes.byteLength, 32);
    parts.push(head, Buffer.from(f.bytes.buffer, f.bytes.byteOffset, f.bytes.byteLength));
  }
  return Buffer.concat(parts);
}

/**
 * A bucket is held in memory while it is checked (at most 32 MiB); at most this many are held at
 * once per process, the rest wait their turn, so a hub's memory for buckets stays bounded however
 * many workstations send at once.
 */
const BUCKETS_AT_ONCE = 4;
let bucketsHeld = 0;
const bucketQueue: (() => void)[] = [];

async function bucketTurn(): Promise<() => void> {
  // A released turn passes straight to the next waiter, so none is admitted twice.
  if (bucketsHeld < BUCKETS_AT_ONCE) bucketsHeld += 1;
  else await new Promise<void>((resolve) => bucketQueue.push(resolve));
  return () => {
    const next = bucketQueue.shift();
    if (next) next();
    else bucketsHeld -= 1;
  };
}

export async function receiveBucket(dataDir: string, body: Readable, maxBytes: number): Promise<{ stored: number; present: number; bytes: number }> {
  const release = await bucketTurn();
  try {
    return await receiveBucketNow(dataDir, body, maxBytes);
  } finally {
    release();
  }
}

async function receiveBucketNow(dataDir: string, body: Readable, maxBytes: number): Promise<{ stored: number; present: number; bytes: number }> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body) {
    const b = chunk as Buffer;
    total += b.byteLength;
    if (total > maxBytes) throw new MiaError('too_large', 'Bucket too large', `at most ${maxBytes} bytes per bucket; send larger files with PUT /v1/sync/blobs/{sha256}`);
    chunks.push(b);
  }
  const buf = Buffer.concat(chunks, total);
  const files: { sha256: string; bytes: Buffer }[] = [];
  for (let off = 0; off < buf.byteLength; ) {
    if (files.length >= BUCKET_MAX_FILES) throw new MiaError('invalid', 'Too many files in one bucket', `at most ${BUCKET_MAX_FILES}`);
    if (off + FRAME_HEAD > buf.byteLength) throw new MiaError('invalid', 'Bucket cut short', `file ${files.length + 1}: its 36-byte header is incomplete`);
    const sha256 = buf.subarray(off, off + 32).toString('hex');
    const length = buf.readUInt32BE(off + 32);
    if (length === 0 || length > BUCKET_FILE_MAX) throw new MiaError('invalid', 'Bucket file of a size not taken here', `file ${files.length + 1}: ${length} bytes; 1 to ${BUCKET_FILE_MAX} in a bucket`);
    const start = off + FRAME_HEAD;
    if (start + length > buf.byteLength) throw new MiaError('invalid', 'Bucket cut short', `file ${files.length + 1} (${sha256}) declares ${length} bytes, ${buf.byteLength - start} follow`);
    const bytes = buf.subarray(start, start + length);
    const actual = createHash('sha256').update(bytes).digest('hex');
    if (actual !== sha256) throw new MiaError('unprocessable', 'A file does not match its SHA-256', `file ${files.length + 1} hashes to ${actual}, not ${sha256}; nothing of this bucket was kept`);
    files.push({ sha256, bytes });
    off = start + length;
  }
  const writer = createArchiveWriter(dataDir);
  let stored = 0;
  try {
    for (const f of files) {
      if (hasBlob(dataDir, f.sha256)) continue;
      writer.stage(f.bytes, f.sha256);
      stored += 1;
    }
    await writer.flush();
  } catch (err) {
    await writer.discard();
    throw err;
  }
  return { stored, present: files.length - stored, bytes: total };
}
