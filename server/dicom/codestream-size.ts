/**
 * The image size a compressed frame declares in its own header, read before any codec runs.
 * Codecs size their buffers from that header, not from the DICOM attributes (which parse.ts has
 * already bounded), so a frame whose header claims 60000 x 60000 would have a WASM codec grow its
 * memory to gigabytes before we could compare. Reading the header first keeps every allocation
 * sized by values we checked.
 */
import type { PixelEncoding } from '#server/dicom/transfer-syntax.ts';

export type CodestreamSize = { width: number; height: number };

/** How far into a frame its size header may be looked for (JP2 boxes can precede it). */
const SEARCH_BYTES = 64 * 1024;

const u16 = (b: Uint8Array, at: number): number => ((b[at] ?? 0) << 8) | (b[at + 1] ?? 0);
const u32 = (b: Uint8Array, at: number): number => u16(b, at) * 65536 + u16(b, at + 2);

/** SOFn (T.81 B.2.2) or SOF55 (T.87 JPEG-LS): P, Y, X follow the segment length. */
function jpegSize(b: Uint8Array): CodestreamSize | null {
  if (b[0] !== 0xff || b[1] !== 0xd8) return null;
  let i = 2;
  while (i + 9 < b.length && i < SEARCH_BYTES) {
    if (b[i] !== 0xff) return null;
    const marker = b[i + 1] ?? 0;
    if (marker === 0xff) {
      i += 1; // fill byte
      continue;
    }
    const isSof = (marker >= 0xc0 && marker <= 0xcf && marker !== 0xc4 && marker !== 0xc8 && marker !== 0xcc) || marker === 0xf7;
    if (isSof) return { height: u16(b, i + 5), width: u16(b, i + 7) };
    if (marker === 0xda || marker === 0xd9) return null;
    i += 2 + u16(b, i + 2);
  }
  return null;
}

/** SIZ (T.800 A.5.1) right after SOC: the image area is Xsiz - XOsiz by Ysiz - YOsiz. */
function j2kSize(b: Uint8Array): CodestreamSize | null {
  const limit = Math.min(b.length - 24, SEARCH_BYTES);
  for (let i = 0; i < limit; i++) {
    if (b[i] === 0xff && b[i + 1] === 0x4f && b[i + 2] === 0xff && b[i + 3] === 0x51) {
      const siz = i + 4;
      const x = u32(b, siz + 4);
      const y = u32(b, siz + 8);
      const x0 = u32(b, siz + 12);
      const y0 = u32(b, siz + 16);
      return { width: x - x0, height: y - y0 };
    }
  }
  return null;
}

/** The declared size, or null where the header cannot be found (the codec then decides). */
export function codestreamSize(encoding: PixelEncoding, frame: Uint8Array): CodestreamSize | null {
  switch (encoding) {
    case 'jpeg-baseline':
    case 'jpeg-extended':
    case 'jpeg-lossless':
    case 'jpeg-ls':
      return jpegSize(frame);
    case 'jpeg-2000':
    case 'htj2k':
      return j2kSize(frame);
    default:
      return null;
  }
}
