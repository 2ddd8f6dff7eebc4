/**
 * Media types of DICOMweb (PS3.18 8.7): what an Accept header asks for, and multipart/related
 * responses written part by part from a source that yields each part's bytes as it goes, so a
 * study of a thousand files is streamed, never held in memory.
 */
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import { MiaError } from '#server/errors.ts';

export type AcceptedType = {
  /** Lower-case media type, e.g. multipart/related or application/dicom+json. */
  mediaType: string;
  /** The `type` parameter of multipart/related, lower case. */
  partType: string | null;
  /** The `transfer-syntax` parameter: a UID, '*' or null when absent. */
  transferSyntax: string | null;
  q: number;
};

/** The media ranges of an Accept header with the parameters DICOMweb uses, best first. */
export function acceptedTypes(header: string | undefined): AcceptedType[] {
  if (!header || header.trim() === '') return [];
  const out: AcceptedType[] = [];
  // Quoted parameters may hold commas (type="application/dicom"): split outside quotes only.
  for (const range of header.slice(0, 4096).match(/(?:[^,"]|"[^"]*")+/g) ?? []) {
    const [type = '', ...params] = range.split(';');
    const accepted: AcceptedType = { mediaType: type.trim().toLowerCase(), partType: null, transferSyntax: null, q: 1 };
    for (const param of params) {
      const eq = param.indexOf('=');
      if (eq < 0) continue;
      const name = param.slice(0, eq).trim().toLowerCase();
      const value = param.slice(eq + 1).trim().replace(/^"|"$/g, '');
      if (name === 'type') accepted.partType = value.toLowerCase();
      else if (name === 'transfer-syntax') accepted.transferSyntax = value;
      else if (name === 'q') accepted.q = Number.isFinite(Number(value)) ? Number(value) : 0;
    }
    if (accepted.mediaType !== '' && accepted.q > 0) out.push(accepted);
  }
  return out.sort((a, b) => b.q - a.q);
}

export type Part = { contentType: string; location?: string; body: Uint8Array } | { contentType: string; location?: string; file: string };

export type MultipartBody = { contentType: string; body: Readable };

/**
 * A multipart/related body (RFC 2387) of the parts `source` yields, each file streamed from disk.
 * `rootType`: the type parameter (application/dicom, application/octet-stream...).
 */
export function multipartBody(rootType: string, source: AsyncIterable<Part>): MultipartBody {
  const boundary = `mia-${randomBytes(12).toString('hex')}`;
  async function* chunks(): AsyncGenerator<Buffer> {
    for await (const part of source) {
      const location = part.location ? `Content-Location: ${part.location}\r\n` : '';
      yield Buffer.from(`--${boundary}\r\nContent-Type: ${part.contentType}\r\n${location}\r\n`, 'latin1');
      if ('file' in part) {
        for await (const chunk of createReadStream(part.file)) yield chunk as Buffer;
      } else {
        yield Buffer.from(part.body.buffer, part.body.byteOffset, part.body.byteLength);
      }
      yield Buffer.from('\r\n', 'latin1');
    }
    yield Buffer.from(`--${boundary}--\r\n`, 'latin1');
  }
  return {
    contentType: `multipart/related; type="${rootType}"; boundary=${boundary}`,
    body: Readable.from(chunks(), { objectMode: false }),
  };
}

export function notAcceptable(message: string, details: string): MiaError {
  return new MiaError('not_acceptable', message, details);
}
