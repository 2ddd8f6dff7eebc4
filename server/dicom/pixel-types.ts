/**
 * The shape decoders hand back: one frame, samples interleaved pixel by pixel (R,G,B,R,G,B...),
 * rows top to bottom, in the narrowest typed array that holds the stored values.
 */

export type PixelArray = Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | Float32Array;

export type DecodedFrame = {
  pixels: PixelArray;
  rows: number;
  columns: number;
  samplesPerPixel: number;
  /** Photometric interpretation of `pixels`, which can differ from the file's (PS3.5 8.2). */
  photometricInterpretation: string;
  bitsStored: number;
  pixelRepresentation: 0 | 1;
};

/** Geometry a decoder needs; a subset of DicomInstance so unit tests can build it by hand. */
export type FrameGeometry = {
  rows: number;
  columns: number;
  samplesPerPixel: number;
  bitsAllocated: number;
  bitsStored: number;
  highBit: number;
  pixelRepresentation: 0 | 1;
  planarConfiguration: 0 | 1;
  photometricInterpretation: string;
};

export function emptyArray(bitsAllocated: number, signed: boolean, length: number): PixelArray {
  if (bitsAllocated <= 8) return signed ? new Int8Array(length) : new Uint8Array(length);
  if (bitsAllocated <= 16) return signed ? new Int16Array(length) : new Uint16Array(length);
  return signed ? new Int32Array(length) : new Uint32Array(length);
}

/**
 * Keeps only the Bits Stored bits below High Bit and sign-extends them when Pixel
 * Representation is 1 (PS3.5 8.1.1, PS3.3 C.7.6.3.1.1): bits above High Bit may hold overlay
 * data or junk and must not leak into values. Works in place on unsigned input and returns the
 * array of the right signedness (same buffer).
 */
export function maskStoredBits(raw: Uint8Array | Uint16Array | Uint32Array, g: Pick<FrameGeometry, 'bitsAllocated' | 'bitsStored' | 'highBit' | 'pixelRepresentation'>): PixelArray {
  const container = raw.BYTES_PER_ELEMENT * 8;
  const stored = Math.min(Math.max(g.bitsStored, 1), container);
  const shift = Math.max(0, Math.min(g.highBit + 1 - stored, container - stored));
  const signed = g.pixelRepresentation === 1;
  if (stored < container || shift > 0) {
    const mask = stored >= 32 ? 0xffffffff : (1 << stored) - 1;
    const signBit = 2 ** (stored - 1);
    for (let i = 0; i < raw.length; i++) {
      let v = ((raw[i] ?? 0) >>> shift) & mask;
      v >>>= 0;
      if (signed && v >= signBit) v -= 2 ** stored;
      raw[i] = v;
    }
  }
  if (!signed) return raw;
  if (raw instanceof Uint8Array) return new Int8Array(raw.buffer, raw.byteOffset, raw.length);
  if (raw instanceof Uint16Array) return new Int16Array(raw.buffer, raw.byteOffset, raw.length);
  return new Int32Array(raw.buffer, raw.byteOffset, raw.length);
}
