/**
 * RLE Lossless, PS3.5 Annex G. Written here because several npm decoders get 16- and 32-bit
 * colour wrong: segments are ordered sample by sample and, within a sample, most significant
 * byte first (G.2), and each segment is PackBits (G.3.1).
 */
import { maskStoredBits, type DecodedFrame, type FrameGeometry } from '#server/dicom/pixel-types.ts';

/** PackBits-decodes `src` into exactly `out.length` bytes; short or long segments are errors. */
export function unpackBitsSegment(src: Uint8Array, out: Uint8Array): void {
  let i = 0;
  let o = 0;
  while (o < out.length && i < src.length) {
    const n = src[i++] ?? 0;
    if (n < 128) {
      const count = n + 1;
      if (i + count > src.length || o + count > out.length) throw new Error('RLE literal run past the end of the segment');
      out.set(src.subarray(i, i + count), o);
      i += count;
      o += count;
    } else if (n > 128) {
      const count = 257 - n;
      if (i >= src.length || o + count > out.length) throw new Error('RLE replicate run past the end of the segment');
      out.fill(src[i++] ?? 0, o, o + count);
      o += count;
    }
    // n === 128 (-128): no operation (G.3.1).
  }
  if (o < out.length) throw new Error(`RLE segment decodes to ${o} bytes, expected ${out.length}`);
}

export function decodeRle(frame: Uint8Array, g: FrameGeometry): DecodedFrame {
  if (frame.length < 64) throw new Error('RLE frame shorter than its 64-byte header');
  const view = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  const segmentCount = view.getUint32(0, true);
  const bytesPerSample = g.bitsAllocated / 8;
  if (![1, 2, 4].includes(bytesPerSample)) throw new Error(`unsupported Bits Allocated ${g.bitsAllocated} for RLE`);
  const expected = bytesPerSample * g.samplesPerPixel;
  if (segmentCount !== expected) throw new Error(`RLE header has ${segmentCount} segments, expected ${expected}`);
  const offsets: number[] = [];
  for (let s = 0; s < segmentCount; s++) offsets.push(view.getUint32(4 + s * 4, true));
  const pixels = g.rows * g.columns;
  const segment = new Uint8Array(pixels);
  const words = bytesPerSample === 1 ? new Uint8Array(pixels * g.samplesPerPixel) : bytesPerSample === 2 ? new Uint16Array(pixels * g.samplesPerPixel) : new Uint32Array(pixels * g.samplesPerPixel);
  for (let s = 0; s < segmentCount; s++) {
    const start = offsets[s] ?? 0;
    const end = s + 1 < segmentCount ? (offsets[s + 1] ?? 0) : frame.length;
    if (start < 64 || end > frame.length || end < start) throw new Error(`RLE segment ${s} offset ${start} outside the frame`);
    unpackBitsSegment(frame.subarray(start, end), segment);
    const sample = Math.floor(s / bytesPerSample);
    const shift = 8 * (bytesPerSample - 1 - (s % bytesPerSample));
    for (let p = 0; p < pixels; p++) {
      const idx = p * g.samplesPerPixel + sample;
      words[idx] = ((words[idx] ?? 0) + (segment[p] ?? 0) * 2 ** shift) >>> 0;
    }
  }
  // RLE colour is always decoded as full samples; YBR_FULL_422 is not allowed with RLE (PS3.5 8.2.2).
  return {
    pixels: maskStoredBits(words, g),
    rows: g.rows,
    columns: g.columns,
    samplesPerPixel: g.samplesPerPixel,
    photometricInterpretation: g.photometricInterpretation,
    bitsStored: g.bitsStored,
    pixelRepresentation: g.pixelRepresentation,
  };
}
