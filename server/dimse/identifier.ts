/**
 * The small data sets DIMSE query/retrieve exchanges (PS3.4 C.4): an identifier of string
 * attributes, written in Implicit or Explicit VR Little Endian, and the top-level string values
 * of a response read back. Sequences are skipped (with a nesting bound), never interpreted:
 * mia's queries ask for flat attributes only.
 */
import { decodeText } from '#server/dicom/charset.ts';
import { EXPLICIT_VR_LITTLE_ENDIAN, IMPLICIT_VR_LITTLE_ENDIAN } from '#server/dicom/transfer-syntax.ts';
import { PduError } from '#server/dimse/pdu.ts';
import { trimPadding, withoutNul } from '#server/dicom/values.ts';

/** A tag as group << 16 | element. */
export type Tag = number;
export type IdentifierElement = { tag: Tag; vr: string; value: string };

export const TAG = {
  specificCharacterSet: 0x00080005,
  studyDate: 0x00080020,
  studyTime: 0x00080030,
  accessionNumber: 0x00080050,
  queryRetrieveLevel: 0x00080052,
  modality: 0x00080060,
  modalitiesInStudy: 0x00080061,
  studyDescription: 0x00081030,
  seriesDescription: 0x0008103e,
  patientName: 0x00100010,
  patientId: 0x00100020,
  patientBirthDate: 0x00100030,
  patientSex: 0x00100040,
  studyInstanceUid: 0x0020000d,
  seriesInstanceUid: 0x0020000e,
  seriesNumber: 0x00200011,
  numberOfPatientRelatedStudies: 0x00201200,
  numberOfStudyRelatedSeries: 0x00201206,
  numberOfStudyRelatedInstances: 0x00201208,
  numberOfSeriesRelatedInstances: 0x00201209,
} as const;

/** Explicit VRs with a 2-byte reserved field and a 4-byte length (PS3.5 7.1.2). */
const LONG_VRS = new Set(['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'SQ', 'UC', 'UN', 'UR', 'UT', 'SV', 'UV']);

export function isSupportedIdentifierSyntax(uid: string): boolean {
  return uid === IMPLICIT_VR_LITTLE_ENDIAN || uid === EXPLICIT_VR_LITTLE_ENDIAN;
}

/** Writes the elements in ascending tag order; values are padded to even length (UI with NUL). */
export function encodeIdentifier(elements: readonly IdentifierElement[], transferSyntax: string): Buffer {
  const explicit = transferSyntax === EXPLICIT_VR_LITTLE_ENDIAN;
  const parts: Buffer[] = [];
  for (const e of [...elements].sort((a, b) => a.tag - b.tag)) {
    const raw = Buffer.from(e.value, e.tag === TAG.specificCharacterSet ? 'latin1' : 'utf8');
    const value = raw.length % 2 === 1 ? Buffer.concat([raw, Buffer.from(e.vr === 'UI' ? [0] : [0x20])]) : raw;
    const header = Buffer.alloc(explicit ? (LONG_VRS.has(e.vr) ? 12 : 8) : 8);
    header.writeUInt16LE(e.tag >>> 16, 0);
    header.writeUInt16LE(e.tag & 0xffff, 2);
    if (!explicit) header.writeUInt32LE(value.length, 4);
    else {
      header.write(e.vr, 4, 'latin1');
      if (LONG_VRS.has(e.vr)) header.writeUInt32LE(value.length, 8);
      else header.writeUInt16LE(value.length, 6);
    }
    parts.push(header, value);
  }
  return Buffer.concat(parts);
}

const UNDEFINED = 0xffffffff;
const MAX_DEPTH = 8;

/**
 * The top-level elements of a little-endian data set as raw values by tag. Sequences (and
 * anything of undefined length) are walked to their end and left out.
 */
export function readTopLevel(bytes: Buffer, transferSyntax: string): Map<Tag, Buffer> {
  const explicit = transferSyntax !== IMPLICIT_VR_LITTLE_ENDIAN;
  const values = new Map<Tag, Buffer>();
  readElements(bytes, 0, bytes.length, explicit, 0, values);
  return values;
}

/** Reads elements from `at` to `end` (or to an item/sequence delimiter); returns where it stopped. */
function readElements(bytes: Buffer, start: number, end: number, explicit: boolean, depth: number, into: Map<Tag, Buffer> | null): number {
  if (depth > MAX_DEPTH) throw new PduError(`data set nests sequences deeper than ${MAX_DEPTH}`);
  let at = start;
  while (at < end) {
    if (end - at < 8) throw new PduError('data set ends inside an element header');
    const group = bytes.readUInt16LE(at);
    const element = bytes.readUInt16LE(at + 2);
    const tag = ((group << 16) | element) >>> 0;
    if (group === 0xfffe) {
      // Item delimiter (E00D) ends a nested item of undefined length; its length field is 0.
      if (element === 0xe00d) return at + 8;
      throw new PduError(`unexpected item tag (fffe,${element.toString(16)}) among elements`);
    }
    let vr = '';
    let length: number;
    let headerLength: number;
    if (explicit) {
      vr = bytes.toString('latin1', at + 4, at + 6);
      if (LONG_VRS.has(vr)) {
        if (end - at < 12) throw new PduError('data set ends inside an element header');
        length = bytes.readUInt32LE(at + 8);
        headerLength = 12;
      } else {
        length = bytes.readUInt16LE(at + 6);
        headerLength = 8;
      }
    } else {
      length = bytes.readUInt32LE(at + 4);
      headerLength = 8;
    }
    at += headerLength;
    if (length === UNDEFINED) {
      at = skipSequence(bytes, at, end, explicit, depth + 1);
      continue;
    }
    if (length > end - at) throw new PduError(`element (${group.toString(16).padStart(4, '0')},${element.toString(16).padStart(4, '0')}) of ${length} bytes overruns the data set`);
    if (vr === 'SQ') readSequenceItems(bytes, at, at + length, explicit, depth + 1);
    else into?.set(tag, bytes.subarray(at, at + length));
    at += length;
  }
  return at;
}

/** Walks items of a defined-length sequence value. */
function readSequenceItems(bytes: Buffer, start: number, end: number, explicit: boolean, depth: number): void {
  let at = start;
  while (at < end) {
    if (end - at < 8) throw new PduError('sequence ends inside an item header');
    const length = bytes.readUInt32LE(at + 4);
    at += 8;
    if (length === UNDEFINED) at = readElements(bytes, at, end, explicit, depth + 1, null);
    else {
      if (length > end - at) throw new PduError('sequence item overruns its sequence');
      readElements(bytes, at, at + length, explicit, depth + 1, null);
      at += length;
    }
  }
}

/** Walks an undefined-length value to just after its sequence delimiter (fffe,e0dd). */
function skipSequence(bytes: Buffer, start: number, end: number, explicit: boolean, depth: number): number {
  let at = start;
  while (at < end) {
    if (end - at < 8) break;
    const group = bytes.readUInt16LE(at);
    const element = bytes.readUInt16LE(at + 2);
    const length = bytes.readUInt32LE(at + 4);
    if (group !== 0xfffe) throw new PduError('undefined-length value that is not a sequence');
    at += 8;
    if (element === 0xe0dd) return at;
    if (element !== 0xe000) throw new PduError(`unexpected item tag (fffe,${element.toString(16)}) in a sequence`);
    if (length === UNDEFINED) at = readElements(bytes, at, end, explicit, depth + 1, null);
    else {
      if (length > end - at) throw new PduError('sequence item overruns the data set');
      readElements(bytes, at, at + length, explicit, depth + 1, null);
      at += length;
    }
  }
  throw new PduError('sequence of undefined length without its delimiter');
}

/** String values of a response, decoded in its Specific Character Set, padding trimmed. */
export function stringValues(values: Map<Tag, Buffer>): (tag: Tag) => string {
  const charsetRaw = values.get(TAG.specificCharacterSet);
  const charset = charsetRaw ? trimPadding(charsetRaw.toString('latin1')) : undefined;
  return (tag) => {
    const raw = values.get(tag);
    if (!raw) return '';
    return withoutNul(trimPadding(decodeText(new Uint8Array(raw.buffer, raw.byteOffset, raw.length), charset)).replace(/^ +/, ''));
  };
}
