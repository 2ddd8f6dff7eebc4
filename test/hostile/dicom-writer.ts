/**
 * A tiny Explicit VR Little Endian writer for hostile test files: it writes whatever it is told,
 * including values no real modality would (absurd frame counts, lying lengths), which is why
 * it is ours and not a library's (pydicom and dcmtk refuse or fix most of these).
 */
import { deflateRawSync, constants as zlibConstants } from 'node:zlib';

export type El = { tag: number; vr: string; value: Uint8Array; undefinedLength?: boolean };

const LONG_VRS = new Set(['OB', 'OW', 'OF', 'OD', 'OL', 'OV', 'SQ', 'UC', 'UN', 'UR', 'UT']);
export const ITEM = 0xfffee000;
const ITEM_DELIMITER = 0xfffee00d;
const SEQUENCE_DELIMITER = 0xfffee0dd;

const text = (s: string): Uint8Array => {
  const padded = s.length % 2 === 0 ? s : `${s}${'\0'}`;
  return new TextEncoder().encode(padded);
};
const textPadded = (s: string): Uint8Array => new TextEncoder().encode(s.length % 2 === 0 ? s : `${s} `);

export const str = (tag: number, vr: string, value: string): El => ({ tag, vr, value: vr === 'UI' ? text(value) : textPadded(value) });
export const us = (tag: number, value: number): El => {
  const b = new Uint8Array(2);
  new DataView(b.buffer).setUint16(0, value, true);
  return { tag, vr: 'US', value: b };
};
export const bytesEl = (tag: number, vr: string, value: Uint8Array): El => ({ tag, vr, value });

function header(tag: number, vr: string, length: number): Uint8Array {
  const long = LONG_VRS.has(vr);
  const out = new Uint8Array(long ? 12 : 8);
  const v = new DataView(out.buffer);
  v.setUint16(0, tag >>> 16, true);
  v.setUint16(2, tag & 0xffff, true);
  out[4] = vr.charCodeAt(0);
  out[5] = vr.charCodeAt(1);
  if (long) v.setUint32(8, length, true);
  else v.setUint16(6, length, true);
  return out;
}

function tagOnly(tag: number, length: number): Uint8Array {
  const out = new Uint8Array(8);
  const v = new DataView(out.buffer);
  v.setUint16(0, tag >>> 16, true);
  v.setUint16(2, tag & 0xffff, true);
  v.setUint32(4, length, true);
  return out;
}

export function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

export function encode(elements: readonly El[]): Uint8Array {
  const sorted = [...elements].sort((a, b) => a.tag - b.tag);
  return concat(sorted.flatMap((e) => [header(e.tag, e.vr, e.undefinedLength ? 0xffffffff : e.value.length), e.value]));
}

/** Encapsulated Pixel Data (PS3.5 A.4): an empty offset table, then one item per fragment. */
export function encapsulated(fragments: readonly Uint8Array[]): El {
  const parts = [tagOnly(ITEM, 0), ...fragments.flatMap((f) => [tagOnly(ITEM, f.length), f]), tagOnly(SEQUENCE_DELIMITER, 0)];
  return { tag: 0x7fe00010, vr: 'OB', value: concat(parts), undefinedLength: true };
}

/** A sequence nested `depth` deep, each item holding the next (undefined lengths throughout). */
export function deepSequence(tag: number, depth: number): El {
  let inner: Uint8Array = new Uint8Array(0);
  for (let i = 0; i < depth; i++) {
    const item = concat([tagOnly(ITEM, 0xffffffff), header(tag, 'SQ', 0xffffffff), inner, tagOnly(SEQUENCE_DELIMITER, 0), tagOnly(ITEM_DELIMITER, 0)]);
    inner = item;
  }
  return { tag, vr: 'SQ', value: concat([inner, tagOnly(SEQUENCE_DELIMITER, 0)]), undefinedLength: true };
}

export const EXPLICIT_LE = '1.2.840.10008.1.2.1';
export const DEFLATED = '1.2.840.10008.1.2.1.99';
export const RLE = '1.2.840.10008.1.2.5';
const CT_STORAGE = '1.2.840.10008.5.1.4.1.1.2';

export type Image = {
  rows: number;
  columns: number;
  frames?: string;
  bitsAllocated?: number;
  uid: string;
  extra?: El[];
  pixelData?: El | null;
};

/** A CT image's data set (without meta) whose pixel data is zeros unless given. */
export function ctDataSet(img: Image): El[] {
  const bits = img.bitsAllocated ?? 16;
  const pixels = img.pixelData === undefined ? bytesEl(0x7fe00010, 'OW', new Uint8Array(img.rows * img.columns * (bits / 8))) : img.pixelData;
  return [
    str(0x00080016, 'UI', CT_STORAGE),
    str(0x00080018, 'UI', `${img.uid}.3`),
    str(0x00080060, 'CS', 'CT'),
    str(0x00100010, 'PN', 'HOSTILE^TEST'),
    str(0x00100020, 'LO', 'HOSTILE-1'),
    str(0x0020000d, 'UI', `${img.uid}.1`),
    str(0x0020000e, 'UI', `${img.uid}.2`),
    us(0x00280002, 1),
    str(0x00280004, 'CS', 'MONOCHROME2'),
    ...(img.frames !== undefined ? [str(0x00280008, 'IS', img.frames)] : []),
    us(0x00280010, img.rows),
    us(0x00280011, img.columns),
    us(0x00280100, bits),
    us(0x00280101, bits),
    us(0x00280102, bits - 1),
    us(0x00280103, 0),
    ...(img.extra ?? []),
    ...(pixels ? [pixels] : []),
  ];
}

export function part10(dataSet: Uint8Array, transferSyntax: string, sopInstanceUid: string): Uint8Array {
  const metaBody = encode([
    bytesEl(0x00020001, 'OB', Uint8Array.from([0, 1])),
    str(0x00020002, 'UI', CT_STORAGE),
    str(0x00020003, 'UI', sopInstanceUid),
    str(0x00020010, 'UI', transferSyntax),
  ]);
  const groupLength = new Uint8Array(4);
  new DataView(groupLength.buffer).setUint32(0, metaBody.length, true);
  const meta = concat([header(0x00020000, 'UL', 4), groupLength, metaBody]);
  const preamble = new Uint8Array(132);
  preamble.set([0x44, 0x49, 0x43, 0x4d], 128);
  return concat([preamble, meta, dataSet]);
}

/**
 * Raw deflate of `head`, then `zeros` zero bytes, then `tail`, without ever holding the zeros:
 * a full-flushed block of 1 MiB of zeros starts from an empty window, so it can be repeated.
 */
export function deflateWithZeros(head: Uint8Array, zeros: number, tail: Uint8Array): Uint8Array {
  const MiB = 1024 * 1024;
  if (zeros % MiB !== 0) throw new Error('zeros must be whole MiB');
  const flush = { finishFlush: zlibConstants.Z_FULL_FLUSH, level: 9 };
  const headBlock = deflateRawSync(head, flush);
  const zeroBlock = deflateRawSync(new Uint8Array(MiB), flush);
  const tailBlock = deflateRawSync(tail, { level: 9 });
  return concat([headBlock, ...Array.from({ length: zeros / MiB }, () => zeroBlock), tailBlock]);
}

/** A deflated file: meta in the clear, then the data set deflated (PS3.5 A.5). */
export function deflatedPart10(deflated: Uint8Array, sopInstanceUid: string): Uint8Array {
  return part10(deflated, DEFLATED, sopInstanceUid);
}
