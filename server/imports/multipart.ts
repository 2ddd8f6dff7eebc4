/**
 * Streams a multipart/related body (RFC 2387; as DICOMweb STOW-RS sends it, PS3.18 10.5) into
 * one temporary file per part, never holding more than a chunk and a delimiter in memory.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { MiaError } from '#server/errors.ts';
import { PRIVATE_FILE_MODE } from '#server/private-files.ts';

/** `synced`: the part's file fsynced and closed, started as the part ended (see `syncAndClose`). */
export type ReceivedPart = { index: number; file: string; contentType: string; bytes: number; synced?: Promise<void> };

/**
 * Makes a spooled file durable and closes it, without holding up the next part: an upload's file
 * is renamed into the archive rather than copied (ingest.ts prepareStagedFile), and the import's
 * checks run while this fsync does. Never an unhandled rejection: the import awaits it, and a
 * part it does not store is removed whatever the fsync did.
 */
export function syncAndClose(handle: FileHandle): Promise<void> {
  const synced = handle.sync().then(
    async () => await handle.close(),
    async (err: unknown) => {
      await handle.close().catch(() => undefined);
      throw err;
    },
  );
  void synced.catch(() => undefined);
  return synced;
}

const CRLF = Buffer.from('\r\n');
const HEADER_END = Buffer.from('\r\n\r\n');
const MAX_HEADER_BYTES = 16 * 1024;

/**
 * The boundary parameter of a Content-Type header (RFC 2046 5.1.1), quoted or not. RFC 2046
 * allows 70 characters, but Orthanc 1.10's DICOMweb client sends 73 (two UUIDs joined by a dash):
 * up to 200 are taken whole rather than cut into a delimiter that never matches.
 */
export function boundaryOf(contentType: string): string {
  const match = /;\s*boundary=(?:"([^"]{1,200})"|([^;\s"]{1,200}))(?=;|\s|$)/i.exec(contentType);
  const boundary = match?.[1] ?? match?.[2];
  if (!boundary) throw new MiaError('invalid', 'multipart body without a boundary', 'Content-Type: multipart/related; type="application/dicom"; boundary=...');
  return boundary;
}

function partType(headerBlock: string): string {
  for (const line of headerBlock.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === 'content-type') return line.slice(colon + 1).trim();
  }
  // RFC 2387: parts default to the root type given by the type parameter.
  return 'application/dicom';
}

export async function receiveMultipart(
  stream: AsyncIterable<Buffer | string>,
  boundary: string,
  dir: string,
  limits: { maxBytes: number; maxParts: number },
): Promise<ReceivedPart[]> {
  const { maxBytes, maxParts } = limits;
  // A leading CRLF lets the first delimiter (which may open the body) match like the others.
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  const keep = delimiter.length - 1;
  const parts: ReceivedPart[] = [];
  let state: 'preamble' | 'after-delimiter' | 'headers' | 'body' | 'done' = 'preamble';
  let buffer: Buffer = CRLF;
  let total = 0;
  let handle: FileHandle | undefined;
  let current: ReceivedPart | undefined;

  const closePart = (): void => {
    if (handle && current) current.synced = syncAndClose(handle);
    handle = undefined;
    if (current) parts.push(current);
    current = undefined;
  };

  try {
    for await (const raw of stream) {
      const chunk = typeof raw === 'string' ? Buffer.from(raw) : raw;
      total += chunk.length;
      if (total > maxBytes) throw new MiaError('too_large', 'Request body too large', `body: at most ${maxBytes} bytes`);
      if (state === 'done') continue;
      buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
      for (;;) {
        if (state === 'preamble') {
          const at = buffer.indexOf(delimiter);
          if (at < 0) {
            buffer = buffer.subarray(Math.max(0, buffer.length - keep));
            break;
          }
          buffer = buffer.subarray(at + delimiter.length);
          state = 'after-delimiter';
        } else if (state === 'after-delimiter') {
          // Transport padding (spaces, tabs) may follow a delimiter (RFC 2046 5.1.1).
          let i = 0;
          while (i < buffer.length && (buffer[i] === 0x20 || buffer[i] === 0x09)) i++;
          if (buffer.length - i < 2) break;
          if (buffer[i] === 0x2d && buffer[i + 1] === 0x2d) {
            state = 'done';
            break;
          }
          if (buffer[i] !== 0x0d || buffer[i + 1] !== 0x0a) throw new MiaError('invalid', 'Malformed multipart body', 'expected CRLF after a boundary delimiter');
          buffer = buffer.subarray(i + 2);
          state = 'headers';
        } else if (state === 'headers') {
          // A part without headers starts with the blank line right away.
          const empty = buffer.length >= 2 && buffer[0] === 0x0d && buffer[1] === 0x0a;
          const at = empty ? -2 : buffer.indexOf(HEADER_END);
          if (at === -1) {
            if (buffer.length > MAX_HEADER_BYTES) throw new MiaError('invalid', 'Malformed multipart body', 'part headers longer than 16 KB');
            break;
          }
          // Refused before the part's file is opened: every part costs a file, a parse and, if
          // rejected, a row; a body of thousands of empty parts must not cost thousands of each.
          if (parts.length >= maxParts) {
            throw new MiaError('too_large', 'Too many parts in one upload', `body: at most ${maxParts} parts per request; send the rest in further requests`);
          }
          const headerBlock = at < 0 ? '' : buffer.subarray(0, at).toString('latin1');
          buffer = buffer.subarray(at < 0 ? 2 : at + HEADER_END.length);
          current = { index: parts.length + 1, file: join(dir, `part-${parts.length + 1}`), contentType: partType(headerBlock), bytes: 0 };
          handle = await open(current.file, 'wx', PRIVATE_FILE_MODE);
          state = 'body';
        } else if (state === 'body') {
          const at = buffer.indexOf(delimiter);
          const end = at < 0 ? Math.max(0, buffer.length - keep) : at;
          if (end > 0 && handle && current) {
            await handle.write(buffer.subarray(0, end));
            current.bytes += end;
          }
          if (at < 0) {
            buffer = buffer.subarray(end);
            break;
          }
          buffer = buffer.subarray(at + delimiter.length);
          closePart();
          state = 'after-delimiter';
        } else {
          break;
        }
      }
    }
  } finally {
    if (handle) await handle.close();
  }
  if (state !== 'done') throw new MiaError('invalid', 'Malformed multipart body', 'the body ended before the closing boundary delimiter');
  return parts;
}
