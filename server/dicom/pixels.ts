/**
 * Decodes one frame of a parsed instance into typed pixel values, exactly for every lossless
 * transfer syntax. Codecs are picked per transfer syntax (PS3.5 Annex A) and loaded lazily.
 */
import { Decoder as LosslessJpegDecoder } from '@cornerstonejs/jpeg-lossless-decoder-js';
import { MAX_SAMPLES_PER_FRAME, datasetBytes, type DicomInstance } from '#server/dicom/parse.ts';
import { describeTransferSyntax, findTransferSyntax } from '#server/dicom/transfer-syntax.ts';
import { frameBytes } from '#server/dicom/frame-fragments.ts';
import { codestreamSize } from '#server/dicom/codestream-size.ts';
import { decodeNative, type PixelStorage } from '#server/dicom/native.ts';
import { decodeRle } from '#server/dicom/rle.ts';
import { decodeWithWasm, type CodecName } from '#server/dicom/codecs.ts';
import { decodeJpegDct } from '#server/dicom/jpeg-dct.ts';
import { maskStoredBits, type DecodedFrame, type FrameGeometry } from '#server/dicom/pixel-types.ts';

export type { DecodedFrame, PixelArray } from '#server/dicom/pixel-types.ts';
export type { PixelStorage } from '#server/dicom/native.ts';

function errorText(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === 'string') return err;
  // Emscripten throws C++ exceptions as bare numbers (pointers).
  return `codec failure (${String(err)})`;
}

function toWords(data: Uint8Array, bitsAllocated: number, codecBits: number): Uint8Array | Uint16Array {
  if (codecBits <= 8) {
    if (bitsAllocated <= 8) return data;
    return Uint16Array.from(data);
  }
  const aligned = data.byteOffset % 2 === 0 ? data : data.slice();
  return new Uint16Array(aligned.buffer, aligned.byteOffset, Math.floor(aligned.byteLength / 2)).slice();
}

function interleave(planar: Uint8Array | Uint16Array, pixels: number, samples: number): Uint8Array | Uint16Array {
  const out = planar.slice();
  for (let s = 0; s < samples; s++) for (let p = 0; p < pixels; p++) out[p * samples + s] = planar[s * pixels + p] ?? 0;
  return out;
}

/**
 * libjpeg treats a 3-component JPEG without JFIF/Adobe markers as YCbCr unless its component
 * ids are 'R','G','B'. DICOM RGB with such a stream was compressed without the colour
 * transform (PS3.5 8.2.1), so we relabel the ids in SOF and SOS to get it decoded as RGB.
 * The WASM build also ignores an Adobe APP14 marker with transform 0 (T.872: RGB), e.g.
 * pydicom's SC_rgb_jpeg.dcm, so that case is relabelled too.
 */
function markRgbComponents(jpeg: Uint8Array): Uint8Array {
  let hasMarker = false;
  for (let i = 2; i + 3 < jpeg.length; ) {
    if (jpeg[i] !== 0xff) break;
    const m = jpeg[i + 1] ?? 0;
    if (m === 0xe0) hasMarker = true;
    // Adobe APP14 transform byte (after "Adobe", version, flags0, flags1): 0 means RGB.
    // A short segment (SC_rgb_jpeg.dcm's is 12 bytes) carries no transform: treat as RGB.
    const segLength = ((jpeg[i + 2] ?? 0) << 8) | (jpeg[i + 3] ?? 0);
    if (m === 0xee && segLength >= 14 && (jpeg[i + 15] ?? 0) !== 0) hasMarker = true;
    if (m === 0xda) break;
    i += 2 + (((jpeg[i + 2] ?? 0) << 8) | (jpeg[i + 3] ?? 0));
  }
  if (hasMarker) return jpeg;
  const out = jpeg.slice();
  const ids = [0x52, 0x47, 0x42];
  for (let i = 2; i + 3 < out.length; ) {
    if (out[i] !== 0xff) break;
    const m = out[i + 1] ?? 0;
    const len = ((out[i + 2] ?? 0) << 8) | (out[i + 3] ?? 0);
    if (m === 0xc0 || m === 0xc1) {
      const n = out[i + 9] ?? 0;
      for (let c = 0; c < n && c < 3; c++) out[i + 10 + c * 3] = ids[c] ?? 0;
    } else if (m === 0xda) {
      const n = out[i + 4] ?? 0;
      for (let c = 0; c < n && c < 3; c++) out[i + 5 + c * 2] = ids[c] ?? 0;
      break;
    }
    i += 2 + len;
  }
  return out;
}

/** Sample precision from the SOF segment (T.81 B.2.2); 8 when not found. */
function jpegPrecision(jpeg: Uint8Array): number {
  for (let i = 2; i + 4 < jpeg.length; ) {
    if (jpeg[i] !== 0xff) return 8;
    const m = jpeg[i + 1] ?? 0;
    if (m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc) return jpeg[i + 4] ?? 8;
    if (m === 0xda) return 8;
    i += 2 + (((jpeg[i + 2] ?? 0) << 8) | (jpeg[i + 3] ?? 0));
  }
  return 8;
}

async function decodeWasmFrame(name: CodecName, encoded: Uint8Array, g: FrameGeometry): Promise<DecodedFrame> {
  const { data, info, interleaveMode } = await decodeWithWasm(name, encoded);
  if (info.width === 0 || info.height === 0) throw new Error(`${name} codec could not decode the frame`);
  if (info.width !== g.columns || info.height !== g.rows) {
    throw new Error(`codestream is ${info.width}x${info.height}, DICOM says ${g.columns}x${g.rows}`);
  }
  if (info.componentCount !== g.samplesPerPixel) {
    throw new Error(`codestream has ${info.componentCount} components, DICOM says ${g.samplesPerPixel}`);
  }
  const expected = g.rows * g.columns * g.samplesPerPixel * (info.bitsPerSample > 8 ? 2 : 1);
  if (data.length < expected) throw new Error(`codec returned ${data.length} bytes, expected ${expected}`);
  let words = toWords(data.subarray(0, expected), g.bitsAllocated, info.bitsPerSample);
  // CharLS returns planes one after another for interleave mode 0 (ISO 14495-1 "none").
  if (interleaveMode === 0 && g.samplesPerPixel > 1) words = interleave(words, g.rows * g.columns, g.samplesPerPixel);
  let photometric = g.photometricInterpretation;
  if (name === 'jpegBaseline' && g.samplesPerPixel === 3) photometric = 'RGB';
  // OpenJPEG undoes the component transform of YBR_ICT/YBR_RCT (PS3.5 8.2.4).
  if ((name === 'jpeg2000' || name === 'htj2k') && (photometric === 'YBR_ICT' || photometric === 'YBR_RCT')) photometric = 'RGB';
  return finish(words, g, photometric);
}

function finish(words: Uint8Array | Uint16Array | Uint32Array, g: FrameGeometry, photometric: string): DecodedFrame {
  return {
    pixels: maskStoredBits(words, g),
    rows: g.rows,
    columns: g.columns,
    samplesPerPixel: g.samplesPerPixel,
    photometricInterpretation: photometric,
    bitsStored: g.bitsStored,
    pixelRepresentation: g.pixelRepresentation,
  };
}

function decodeLosslessJpeg(encoded: Uint8Array, g: FrameGeometry): DecodedFrame {
  const copy = encoded.slice();
  const out = new LosslessJpegDecoder().decode(copy.buffer, 0, copy.length, g.bitsAllocated > 8 ? 2 : 1);
  const expected = g.rows * g.columns * g.samplesPerPixel;
  if (out.length < expected) throw new Error(`lossless JPEG decoded ${out.length} samples, expected ${expected}`);
  const words = out.length === expected ? out : out.subarray(0, expected);
  return finish(g.bitsAllocated > 8 && words instanceof Uint8Array ? Uint16Array.from(words) : words.slice(), g, g.photometricInterpretation);
}

export async function decodeFrame(bytes: Uint8Array, instance: DicomInstance, frameIndex: number, storage: PixelStorage = 'copy'): Promise<DecodedFrame> {
  const px = instance.pixelData;
  if (!instance.hasPixelData || !px) throw new Error('no pixel data');
  if (!Number.isInteger(frameIndex) || frameIndex < 0 || frameIndex >= instance.numberOfFrames) {
    throw new Error(`frame ${frameIndex} out of range (0..${instance.numberOfFrames - 1})`);
  }
  // A damaged Rows/Columns can ask for gigabytes; refuse before any codec allocates.
  if (instance.rows * instance.columns * instance.samplesPerPixel > MAX_SAMPLES_PER_FRAME) {
    throw new Error(`frame of ${instance.rows}x${instance.columns}x${instance.samplesPerPixel} samples is larger than we decode`);
  }
  const syntax = findTransferSyntax(instance.transferSyntaxUid);
  if (!syntax) throw new Error(`unsupported transfer syntax ${describeTransferSyntax(instance.transferSyntaxUid)}`);
  const data = datasetBytes(bytes, instance);
  const g: FrameGeometry = instance;
  if (!px.encapsulated) {
    if (px.offset + px.length > data.length) throw new Error(`pixel data runs past the end of the file`);
    return decodeNative(data.subarray(px.offset, px.offset + px.length), frameIndex, g, instance.bigEndian, storage);
  }
  const encoded = frameBytes(data, px, frameIndex, instance.numberOfFrames);
  if (syntax.encoding !== 'rle') {
    // Codecs allocate by their own header; it must agree with the attributes parse.ts bounded.
    const declared = codestreamSize(syntax.encoding, encoded);
    if (!declared) throw new Error(`cannot decode frame ${frameIndex} (${syntax.name}): no image header in the compressed frame`);
    if (declared.width !== instance.columns || declared.height !== instance.rows) {
      throw new Error(`cannot decode frame ${frameIndex} (${syntax.name}): codestream is ${declared.width}x${declared.height}, DICOM says ${instance.columns}x${instance.rows}`);
    }
  }
  try {
    switch (syntax.encoding) {
      case 'rle':
        return decodeRle(encoded, g);
      case 'jpeg-baseline':
      case 'jpeg-extended': {
        // 4.51 also carries 8-bit process 2 streams, which libjpeg-turbo decodes exactly.
        if (jpegPrecision(encoded) > 8) return decodeJpegDct(encoded, g);
        const stream = g.samplesPerPixel === 3 && g.photometricInterpretation === 'RGB' ? markRgbComponents(encoded) : encoded;
        return await decodeWasmFrame('jpegBaseline', stream, g);
      }
      case 'jpeg-lossless':
        return decodeLosslessJpeg(encoded, g);
      case 'jpeg-ls':
        return await decodeWasmFrame('jpegLs', encoded, g);
      case 'jpeg-2000':
        return await decodeWasmFrame('jpeg2000', encoded, g);
      case 'htj2k':
        return await decodeWasmFrame('htj2k', encoded, g);
      case 'native':
      case 'unsupported':
        throw new Error(`unsupported transfer syntax ${describeTransferSyntax(syntax.uid)}`);
    }
  } catch (err) {
    throw new Error(`cannot decode frame ${frameIndex} (${syntax.name}): ${errorText(err)}`);
  }
}
