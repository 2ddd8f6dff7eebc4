/**
 * HTTP uploads to temporary files: one application/dicom body, or the parts of a
 * multipart/related body. Bodies are streamed to disk (never buffered whole) and capped.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, open, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { MiaError } from '#server/errors.ts';
import { boundaryOf, receiveMultipart, type ReceivedPart } from '#server/imports/multipart.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';

export const UPLOAD_TYPES = ['application/dicom', 'multipart/related'] as const;
/** 2 GiB: a large multi-frame study fits; a runaway client does not fill the disk. */
export const UPLOAD_LIMIT_BYTES = 2 * 1024 ** 3;

export type ReceivedUpload = { dir: string; multipart: boolean; parts: ReceivedPart[] };

/** Where request bodies are spooled, one folder per request (relative to the data folder). */
export const UPLOADS_DIR = join('tmp', 'uploads');

/** The pid of the process that spooled an upload folder (<pid>-<random>), if the name says. */
export function uploadReceiverPid(name: string): number | null {
  const match = /^(\d+)-[0-9a-f]+$/.exec(name);
  return match?.[1] ? Number(match[1]) : null;
}

async function receiveSingle(stream: AsyncIterable<Buffer | string>, file: string, maxBytes: number): Promise<ReceivedPart> {
  const handle = await open(file, 'wx', PRIVATE_FILE_MODE);
  let bytes = 0;
  try {
    for await (const raw of stream) {
      const chunk = typeof raw === 'string' ? Buffer.from(raw) : raw;
      bytes += chunk.length;
      if (bytes > maxBytes) throw new MiaError('too_large', 'Request body too large', `body: at most ${maxBytes} bytes`);
      await handle.write(chunk);
    }
  } finally {
    await handle.close();
  }
  return { index: 1, file, contentType: 'application/dicom', bytes };
}

export async function receiveUpload(
  dataDir: string,
  body: { contentType: string; stream: Readable; maxBytes: number },
  maxParts: number,
): Promise<ReceivedUpload> {
  // The pid first: a later start removes the folders of receivers that died (leftovers.ts).
  const dir = join(dataDir, UPLOADS_DIR, `${process.pid}-${randomBytes(8).toString('hex')}`);
  await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const mediaType = body.contentType.split(';')[0]?.trim().toLowerCase();
  try {
    if (mediaType === 'multipart/related') {
      const parts = await receiveMultipart(body.stream, boundaryOf(body.contentType), dir, { maxBytes: body.maxBytes, maxParts });
      if (parts.length === 0) throw new MiaError('invalid', 'Empty multipart body', 'send at least one application/dicom part');
      return { dir, multipart: true, parts };
    }
    return { dir, multipart: false, parts: [await receiveSingle(body.stream, join(dir, 'part-1'), body.maxBytes)] };
  } catch (err) {
    // Stop reading what the client still sends; the error response closes the exchange.
    body.stream.resume();
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}

export async function discardUpload(upload: ReceivedUpload): Promise<void> {
  await rm(upload.dir, { recursive: true, force: true });
}
