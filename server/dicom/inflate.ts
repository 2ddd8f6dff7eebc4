/**
 * Inflating a Deflated Explicit VR Little Endian data set (PS3.5 A.5) without trusting it.
 * A few hundred kilobytes of deflate can stand for gigabytes, so the output is capped as it
 * grows, by limits that tighten as soon as the data set says how large it is: once the Pixel
 * Data element's header has come out, nothing but its declared value and a small trailer may
 * follow. zlib runs on the thread pool chunk by chunk, so the event loop keeps serving while a
 * large legitimate file inflates, and a bomb is stopped at the first chunk past its cap.
 */
import { createInflateRaw, inflateRawSync } from 'node:zlib';
import { walkElements } from '#server/dicom/data-set.ts';

/** Everything may inflate to at most this, whatever the data set declares. */
export const MAX_INFLATED_BYTES = 256 * 1024 * 1024;
/** The elements before Pixel Data (or a data set without it) may inflate to at most this. */
export const MAX_INFLATED_HEADER_BYTES = 32 * 1024 * 1024;
/** Elements after Pixel Data (padding, signatures) may add at most this. */
const TRAILER_BYTES = 1024 * 1024;
const CHUNK_BYTES = 256 * 1024;
const PIXEL_DATA_TAG = 'x7fe00010';

export type InflateLimits = { maxBytes: number; maxHeaderBytes: number };
export const DEFAULT_INFLATE_LIMITS: InflateLimits = { maxBytes: MAX_INFLATED_BYTES, maxHeaderBytes: MAX_INFLATED_HEADER_BYTES };

export type Inflated = { ok: true; bytes: Uint8Array } | { ok: false; reason: string };

const MiB = (n: number): string => (n < 1024 * 1024 ? `${Math.ceil(n / 1024)} KiB` : `${Math.round((n / 1024 / 1024) * 10) / 10} MiB`);

/**
 * Where the Pixel Data value ends, read from the first `prefix` bytes of the data set (which
 * start at `dataSetStart`): null while its header has not come out yet. Explicit VR LE is the
 * only encoding a deflated data set has, so the header is tag, VR, 2 reserved bytes, length.
 */
function pixelDataEnd(prefix: Uint8Array, dataSetStart: number): number | null {
  const walked = walkElements(prefix, dataSetStart, { explicitVr: true, bigEndian: false });
  const complete = walked.elements.get(PIXEL_DATA_TAG);
  if (complete) return complete.dataOffset + complete.length;
  if (walked.ok) return null;
  const at = walked.stoppedAt;
  if (at + 12 > prefix.length) return null;
  const isPixelData = prefix[at] === 0xe0 && prefix[at + 1] === 0x7f && prefix[at + 2] === 0x10 && prefix[at + 3] === 0x00;
  if (!isPixelData) return null;
  const length = new DataView(prefix.buffer, prefix.byteOffset + at + 8, 4).getUint32(0, true);
  // Undefined length (encapsulated) has no place in a deflated native syntax: no tighter cap.
  return length === 0xffffffff ? null : at + 12 + length;
}

function join(head: Uint8Array, chunks: readonly Buffer[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  out.set(head, 0);
  let at = head.length;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/**
 * `bytes` with everything from `start` (the end of the File Meta group) inflated; offsets in
 * the result index the meta group and the inflated data set alike.
 */
export function inflateDataSet(bytes: Uint8Array, start: number, limits: InflateLimits = DEFAULT_INFLATE_LIMITS): Promise<Inflated> {
  const head = bytes.subarray(0, start);
  return new Promise((resolve) => {
    const inflater = createInflateRaw({ chunkSize: CHUNK_BYTES });
    const chunks: Buffer[] = [];
    let total = start;
    let cap = start + limits.maxBytes;
    let capReason = `inflates to more than ${MiB(limits.maxBytes)}, the most mia inflates`;
    let pixelEndKnown = false;
    let nextLook = start + 64 * 1024;
    let settled = false;
    const settle = (result: Inflated): void => {
      if (settled) return;
      settled = true;
      if (!result.ok) inflater.destroy();
      chunks.length = 0;
      resolve(result);
    };
    inflater.on('data', (chunk: Buffer) => {
      if (settled) return;
      chunks.push(chunk);
      total += chunk.length;
      if (!pixelEndKnown && total >= nextLook) {
        // Looking at doubling prefixes keeps the walks to about twice the header's size.
        nextLook = start + (nextLook - start) * 2;
        const end = pixelDataEnd(join(head, chunks, total), start);
        if (end !== null) {
          pixelEndKnown = true;
          if (end + TRAILER_BYTES < cap) {
            cap = end + TRAILER_BYTES;
            capReason = `inflates past its Pixel Data (${MiB(end - start)} declared) by more than ${MiB(TRAILER_BYTES)}`;
          }
        } else if (total - start > limits.maxHeaderBytes) {
          settle({ ok: false, reason: `deflated data set has more than ${MiB(limits.maxHeaderBytes)} before any Pixel Data; not inflated further` });
          return;
        }
      }
      if (total > cap) settle({ ok: false, reason: `deflated data set ${capReason}; not inflated further` });
    });
    inflater.on('error', (err: Error) => settle({ ok: false, reason: `deflated data set does not inflate: ${err.message}` }));
    inflater.on('end', () => {
      if (settled) return;
      if (!pixelEndKnown && total - start > limits.maxHeaderBytes) {
        settle({ ok: false, reason: `deflated data set has more than ${MiB(limits.maxHeaderBytes)} before any Pixel Data; not inflated further` });
        return;
      }
      settle({ ok: true, bytes: join(head, chunks, total) });
    });
    inflater.end(bytes.subarray(start));
  });
}

/**
 * The synchronous fallback for callers that cannot wait (tests, tools): only the absolute
 * cap applies, so the async `inflateDataSet` is what every server path uses.
 */
export function inflateDataSetSync(bytes: Uint8Array, start: number, limits: InflateLimits = DEFAULT_INFLATE_LIMITS): Inflated {
  try {
    const inflated = inflateRawSync(bytes.subarray(start), { maxOutputLength: limits.maxBytes });
    const out = new Uint8Array(start + inflated.length);
    out.set(bytes.subarray(0, start), 0);
    out.set(inflated, start);
    return { ok: true, bytes: out };
  } catch (err) {
    const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
    if (code === 'ERR_BUFFER_TOO_LARGE') return { ok: false, reason: `deflated data set inflates to more than ${MiB(limits.maxBytes)}, the most mia inflates; not inflated further` };
    return { ok: false, reason: `deflated data set does not inflate: ${err instanceof Error ? err.message : 'zlib error'}` };
  }
}
