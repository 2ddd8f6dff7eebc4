/**
 * Native (uncompressed) pixel data, PS3.5 Section 8: frames follow each other without padding,
 * 1-bit data is packed across frame boundaries (8.1.1), big endian files swap words of Bits
 * Allocated size (A.3), Planar Configuration 1 stores colour planes one after another
 * (PS3.3 C.7.6.3.1.3), and YBR_FULL_422 stores two luma samples per chroma pair (8.2.3).
 */
import { maskStoredBits, type DecodedFrame, type FrameGeometry } from '#server/dicom/pixel-types.ts';

export function nativeFrameLength(g: FrameGeometry): number {
  const samples = g.rows * g.columns * g.samplesPerPixel;
  if (g.bitsAllocated === 1) return Math.ceil(samples / 8);
  if (g.photometricInterpretation === 'YBR_FULL_422' && g.samplesPerPixel === 3) {
    return g.rows * g.columns * 2 * (g.bitsAllocated / 8);
  }
  return samples * (g.bitsAllocated / 8);
}

function unpackBits(data: Uint8Array, bitOffset: number, count: number): Uint8Array {
  const out = new Uint8Array(count);
  for (let i = 0; i < count; i++) {
    const bit = bitOffset + i;
    // PS3.5 D.2: the first pixel is the least significant bit of the first byte.
    out[i] = ((data[bit >> 3] ?? 0) >> (bit & 7)) & 1;
  }
  return out;
}

/** Typed arrays use the host's byte order; every platform mia ships for is little endian. */
const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * How decoded pixels may relate to the file's bytes: 'copy' (the default) gives them storage of
 * their own; 'view' lets native pixels in the host's byte order be a view on the bytes (and
 * masking write into them), for a caller that is done with both before it touches the bytes
 * again (the analysis engine, where a 128 KB copy per slice is about a tenth of the work).
 */
export type PixelStorage = 'copy' | 'view';

function readWords(bytes: Uint8Array, bitsAllocated: number, bigEndian: boolean, storage: PixelStorage): Uint8Array | Uint16Array | Uint32Array {
  const size = bitsAllocated / 8;
  const count = Math.floor(bytes.length / size);
  if (size === 1) return storage === 'view' ? bytes.subarray(0, count) : bytes.slice(0, count);
  if (bigEndian !== HOST_LITTLE_ENDIAN) {
    if (storage === 'view' && bytes.byteOffset % size === 0) {
      return size === 2 ? new Uint16Array(bytes.buffer, bytes.byteOffset, count) : new Uint32Array(bytes.buffer, bytes.byteOffset, count);
    }
    // Same byte order: one copy (slice starts a new, aligned buffer) and a view on it.
    const copy = bytes.slice(0, count * size);
    return size === 2 ? new Uint16Array(copy.buffer, 0, count) : new Uint32Array(copy.buffer, 0, count);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (size === 2) {
    const out = new Uint16Array(count);
    for (let i = 0; i < count; i++) out[i] = view.getUint16(i * 2, !bigEndian);
    return out;
  }
  const out = new Uint32Array(count);
  for (let i = 0; i < count; i++) out[i] = view.getUint32(i * 4, !bigEndian);
  return out;
}

function interleavePlanes<T extends Uint8Array | Uint16Array | Uint32Array>(planar: T, pixels: number, samples: number): T {
  const out = planar.slice() as T;
  for (let s = 0; s < samples; s++) {
    for (let p = 0; p < pixels; p++) out[p * samples + s] = planar[s * pixels + p] ?? 0;
  }
  return out;
}

/** YBR_FULL_422 -> YBR_FULL by repeating each chroma pair for both luma samples. */
function upsample422<T extends Uint8Array | Uint16Array | Uint32Array>(packed: T, rows: number, columns: number): T {
  const ctor = packed.constructor as new (n: number) => T;
  const out = new ctor(rows * columns * 3);
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < columns; c += 2) {
      const src = (r * columns + c) * 2;
      const y1 = packed[src] ?? 0;
      const y2 = packed[src + 1] ?? 0;
      const cb = packed[src + 2] ?? 0;
      const cr = packed[src + 3] ?? 0;
      const dst = (r * columns + c) * 3;
      out.set([y1, cb, cr], dst);
      if (c + 1 < columns) out.set([y2, cb, cr], dst + 3);
    }
  }
  return out;
}

export function decodeNative(data: Uint8Array, frameIndex: number, g: FrameGeometry, bigEndian: boolean, storage: PixelStorage = 'copy'): DecodedFrame {
  const base = { rows: g.rows, columns: g.columns, samplesPerPixel: g.samplesPerPixel, bitsStored: g.bitsStored, pixelRepresentation: g.pixelRepresentation };
  const samples = g.rows * g.columns * g.samplesPerPixel;
  if (g.bitsAllocated === 1) {
    const needBits = (frameIndex + 1) * samples;
    if (data.length * 8 < needBits) throw new Error(`pixel data too short for frame ${frameIndex}: ${data.length} bytes`);
    return { ...base, pixels: unpackBits(data, frameIndex * samples, samples), photometricInterpretation: g.photometricInterpretation, bitsStored: 1, pixelRepresentation: 0 };
  }
  if (![8, 16, 32].includes(g.bitsAllocated)) throw new Error(`unsupported Bits Allocated ${g.bitsAllocated} for native pixel data`);
  const length = nativeFrameLength(g);
  const start = frameIndex * length;
  if (start + length > data.length) throw new Error(`pixel data too short for frame ${frameIndex}: need ${start + length} bytes, have ${data.length}`);
  let words = readWords(data.subarray(start, start + length), g.bitsAllocated, bigEndian, storage);
  let photometric = g.photometricInterpretation;
  if (photometric === 'YBR_FULL_422' && g.samplesPerPixel === 3) {
    words = upsample422(words, g.rows, g.columns);
    photometric = 'YBR_FULL';
  } else if (g.planarConfiguration === 1 && g.samplesPerPixel > 1) {
    words = interleavePlanes(words, g.rows * g.columns, g.samplesPerPixel);
  }
  return { ...base, pixels: maskStoredBits(words, g), photometricInterpretation: photometric };
}
