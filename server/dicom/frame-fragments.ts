/**
 * Finds the bytes of one frame in encapsulated pixel data (PS3.5 A.4). A frame may span
 * several fragments; which ones is told by the Basic Offset Table when present, else by one
 * fragment per frame, else by codestream start markers (JPEG SOI, J2K SOC), as viewers do.
 */
import type { PixelDataLocation } from '#server/dicom/parse.ts';

type Encapsulated = Extract<PixelDataLocation, { encapsulated: true }>;

function concat(bytes: Uint8Array, parts: ReadonlyArray<{ offset: number; length: number }>): Uint8Array {
  for (const p of parts) {
    if (p.offset < 0 || p.length < 0 || p.offset + p.length > bytes.length) {
      throw new Error(`pixel data fragment at byte ${p.offset} (${p.length} bytes) runs past the end of the file`);
    }
  }
  const first = parts[0];
  if (parts.length === 1 && first) return bytes.subarray(first.offset, first.offset + first.length);
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let o = 0;
  for (const p of parts) {
    out.set(bytes.subarray(p.offset, p.offset + p.length), o);
    o += p.length;
  }
  return out;
}

function startsFrame(bytes: Uint8Array, offset: number): boolean {
  const a = bytes[offset];
  const b = bytes[offset + 1];
  // JPEG SOI (FFD8) and JPEG 2000 codestream SOC (FF4F).
  return a === 0xff && (b === 0xd8 || b === 0x4f);
}

export function frameBytes(bytes: Uint8Array, px: Encapsulated, frameIndex: number, numberOfFrames: number): Uint8Array {
  const { fragments, basicOffsetTable: bot, fragmentItemOffsets } = px;
  if (fragments.length === 0) throw new Error('encapsulated pixel data has no fragments');
  if (frameIndex < 0 || frameIndex >= numberOfFrames) throw new Error(`frame ${frameIndex} out of range (0..${numberOfFrames - 1})`);
  if (numberOfFrames === 1) return concat(bytes, fragments);
  if (bot.length === numberOfFrames) {
    const start = bot[frameIndex] ?? 0;
    const end = frameIndex + 1 < bot.length ? (bot[frameIndex + 1] ?? Infinity) : Infinity;
    const parts = fragments.filter((_, i) => {
      const at = fragmentItemOffsets[i] ?? -1;
      return at >= start && at < end;
    });
    if (parts.length > 0) return concat(bytes, parts);
  }
  if (fragments.length === numberOfFrames) {
    const f = fragments[frameIndex];
    if (f) return concat(bytes, [f]);
  }
  const starts: number[] = [];
  fragments.forEach((f, i) => {
    if (startsFrame(bytes, f.offset)) starts.push(i);
  });
  if (starts.length === numberOfFrames) {
    const from = starts[frameIndex] ?? 0;
    const to = starts[frameIndex + 1] ?? fragments.length;
    return concat(bytes, fragments.slice(from, to));
  }
  throw new Error(`cannot tell which of ${fragments.length} fragments hold frame ${frameIndex} of ${numberOfFrames}`);
}
