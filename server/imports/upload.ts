/**
 * HTTP uploads to temporary files: one application/dicom body, or the parts of a
 * multipart/related body. Bodies are streamed to disk (never buffered whole) and capped. Each
 * file is fsynced as it ends, on the data folder's file system, so an instance the import stores
 * is renamed into the archive rather than written a second time.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, rm, unlink, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { MiaError } from '#server/errors.ts';
import { stagingTempPath } from '#server/imports/archive.ts';
import { boundaryOf, receiveMultipart, syncAndClose, type ReceivedPart } from '#server/imports/multipart.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';
import { codeOf } from '#server/storage-errors.ts';

export const UPLOAD_TYPES = ['application/dicom', 'multipart/related'] as const;
/** 2 GiB: a large multi-frame study fits; a runaway client does not fill the disk. */
export const UPLOAD_LIMIT_BYTES = 2 * 1024 ** 3;

export type ReceivedUpload = {
  multipart: boolean;
  parts: ReceivedPart[];
  /** Removes every file the upload spooled that the archive did not take (all of them, for a copy with fewer parts). */
  discard(): Promise<void>;
};

/** Where multipart bodies are spooled, one folder per request (relative to the data folder). */
export const UPLOADS_DIR = join('tmp', 'uploads');

/** The pid of the process that spooled an upload folder (<pid>-<random>), if the name says. */
export function uploadReceiverPid(name: string): number | null {
  const match = /^(\d+)-[0-9a-f]+$/.exec(name);
  return match?.[1] ? Number(match[1]) : null;
}

/** Creates `file`; its folder (the archive's staging folder) is made when missing. */
async function create(file: string): Promise<FileHandle> {
  try {
    return await open(file, 'wx', PRIVATE_FILE_MODE);
  } catch (err) {
    if (codeOf(err) !== 'ENOENT') throw err;
    await mkdir(dirname(file), { recursive: true, mode: PRIVATE_DIR_MODE });
    return await open(file, 'wx', PRIVATE_FILE_MODE);
  }
}

async function settled(parts: readonly ReceivedPart[]): Promise<void> {
  await Promise.allSettled(parts.map((p) => p.synced));
}

/**
 * One body straight into the archive's staging folder, under a name whose pid lets a later start
 * remove it should this process die (leftovers.ts): no folder of its own to make and remove.
 */
async function receiveSingle(stream: AsyncIterable<Buffer | string>, file: string, maxBytes: number): Promise<ReceivedPart> {
  const handle = await create(file);
  let bytes = 0;
  try {
    for await (const raw of stream) {
      const chunk = typeof raw === 'string' ? Buffer.from(raw) : raw;
      bytes += chunk.length;
      if (bytes > maxBytes) throw new MiaError('too_large', 'Request body too large', `body: at most ${maxBytes} bytes`);
      await handle.write(chunk);
    }
  } catch (err) {
    await handle.close().catch(() => undefined);
    await unlink(file).catch(() => undefined);
    throw err;
  }
  return { index: 1, file, contentType: 'application/dicom', bytes, synced: syncAndClose(handle) };
}

export async function receiveUpload(
  dataDir: string,
  body: { contentType: string; stream: Readable; maxBytes: number },
  maxParts: number,
): Promise<ReceivedUpload> {
  const mediaType = body.contentType.split(';')[0]?.trim().toLowerCase();
  try {
    if (mediaType !== 'multipart/related') {
      const part = await receiveSingle(body.stream, stagingTempPath(dataDir), body.maxBytes);
      const discard = async (): Promise<void> => {
        await settled([part]);
        // Gone already when the archive took it.
        await unlink(part.file).catch(() => undefined);
      };
      return { multipart: false, parts: [part], discard };
    }
  } catch (err) {
    // Stop reading what the client still sends; the error response closes the exchange.
    body.stream.resume();
    throw err;
  }
  // The pid first: a later start removes the folders of receivers that died (leftovers.ts).
  const dir = join(dataDir, UPLOADS_DIR, `${process.pid}-${randomBytes(8).toString('hex')}`);
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  try {
    const parts = await receiveMultipart(body.stream, boundaryOf(body.contentType), dir, { maxBytes: body.maxBytes, maxParts });
    if (parts.length === 0) throw new MiaError('invalid', 'Empty multipart body', 'send at least one application/dicom part');
    const discard = async (): Promise<void> => {
      await settled(parts);
      await rm(dir, { recursive: true, force: true });
    };
    return { multipart: true, parts, discard };
  } catch (err) {
    body.stream.resume();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}
