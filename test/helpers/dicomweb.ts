/** DICOMweb bodies for tests: STOW-RS requests built from files, multipart responses split into parts. */
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type StowBody = { contentType: string; body: Buffer };

export function stowBody(parts: ReadonlyArray<{ bytes: Buffer; contentType?: string }>): StowBody {
  const boundary = `stow-${Math.random().toString(16).slice(2)}`;
  const chunks: Buffer[] = [];
  for (const part of parts) {
    chunks.push(Buffer.from(`--${boundary}\r\nContent-Type: ${part.contentType ?? 'application/dicom'}\r\n\r\n`), part.bytes, Buffer.from('\r\n'));
  }
  chunks.push(Buffer.from(`--${boundary}--\r\n`));
  return { contentType: `multipart/related; type="application/dicom"; boundary=${boundary}`, body: Buffer.concat(chunks) };
}

export type ResponsePart = { headers: Record<string, string>; body: Buffer };

/** The parts of a multipart/related response (RFC 2046 5.1.1), headers lower-cased. */
export function splitMultipart(contentType: string, body: Buffer): ResponsePart[] {
  const boundary = /boundary=("?)([^";]+)\1/.exec(contentType)?.[2];
  if (!boundary) throw new Error(`no boundary in ${contentType}`);
  const delimiter = Buffer.from(`--${boundary}`);
  const parts: ResponsePart[] = [];
  let at = body.indexOf(delimiter);
  while (at >= 0) {
    const start = at + delimiter.length;
    if (body.subarray(start, start + 2).toString() === '--') break;
    const next = body.indexOf(Buffer.from(`\r\n--${boundary}`), start);
    if (next < 0) throw new Error('unterminated part');
    const part = body.subarray(start + 2, next);
    const headerEnd = part.indexOf('\r\n\r\n');
    const headers: Record<string, string> = {};
    for (const line of part.subarray(0, headerEnd).toString('latin1').split('\r\n')) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    parts.push({ headers, body: part.subarray(headerEnd + 4) });
    at = next + 2;
  }
  return parts;
}

/**
 * A copy of a corpus file made a new instance of a new study by dcmtk's dcmodify (new study,
 * series and SOP Instance UIDs), with the attributes given set: a study of its own to search for.
 */
export function variantOf(file: string, attributes: Record<string, string>): Buffer {
  const dir = mkdtempSync(join(tmpdir(), 'mia-dicomweb-'));
  const copy = join(dir, 'variant.dcm');
  copyFileSync(file, copy);
  const args = ['-nb', '-gst', '-gse', '-gin', '-ie'];
  for (const [tag, value] of Object.entries(attributes)) args.push('-i', `${tag}=${value}`);
  execFileSync('dcmodify', [...args, copy], { stdio: 'pipe' });
  return readFileSync(copy);
}

/** A fetch of raw bytes (the test server's request helper decodes bodies as text). */
export async function fetchBytes(url: string, key: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; body: Buffer }> {
  const res = await fetch(url, { headers: { Authorization: `Bearer ${key}`, ...headers } });
  return { status: res.status, headers: res.headers, body: Buffer.from(await res.arrayBuffer()) };
}
