/**
 * The DICOM tag browser's view of a file: every top-level element (file meta group 0002 and the
 * data set) as tag, VR, name, length and a printable value. Text VRs are decoded in the data
 * set's character set; binary numbers are read by their VR (PS3.5 6.2); bulk data (pixel data,
 * OB/OW/UN...) and sequences are described, not dumped. Implicit VR files carry no VR: their
 * values are shown as text when they are printable, as PS3.5 7.1.3 leaves the VR to a dictionary.
 */
import { byteParser, formatTag, type Element, type Elements } from '#server/dicom/data-set.ts';
import { topLevelElements } from '#server/dicom/parse.ts';
import type { ValueReader } from '#server/dicom/values.ts';

export type TagEntry = { tag: string; vr: string | null; name: string | null; length: number; value: string | null };

/** Names of the attributes a reader looks for first (PS3.6 chapter 6); others show their tag only. */
const NAMES: Readonly<Record<string, string>> = {
  x00020010: 'Transfer Syntax UID',
  x00020002: 'Media Storage SOP Class UID',
  x00020003: 'Media Storage SOP Instance UID',
  x00020013: 'Implementation Version Name',
  x00080005: 'Specific Character Set',
  x00080008: 'Image Type',
  x00080016: 'SOP Class UID',
  x00080018: 'SOP Instance UID',
  x00080020: 'Study Date',
  x00080021: 'Series Date',
  x00080030: 'Study Time',
  x00080050: 'Accession Number',
  x00080060: 'Modality',
  x00080070: 'Manufacturer',
  x00080080: 'Institution Name',
  x00080090: "Referring Physician's Name",
  x00081030: 'Study Description',
  x0008103e: 'Series Description',
  x00081090: "Manufacturer's Model Name",
  x00100010: "Patient's Name",
  x00100020: 'Patient ID',
  x00100030: "Patient's Birth Date",
  x00100040: "Patient's Sex",
  x00101010: "Patient's Age",
  x00180015: 'Body Part Examined',
  x00180050: 'Slice Thickness',
  x00180060: 'KVP',
  x00181164: 'Imager Pixel Spacing',
  x00185100: 'Patient Position',
  x0020000d: 'Study Instance UID',
  x0020000e: 'Series Instance UID',
  x00200010: 'Study ID',
  x00200011: 'Series Number',
  x00200013: 'Instance Number',
  x00200032: 'Image Position (Patient)',
  x00200037: 'Image Orientation (Patient)',
  x00200052: 'Frame of Reference UID',
  x00201041: 'Slice Location',
  x00280002: 'Samples per Pixel',
  x00280004: 'Photometric Interpretation',
  x00280008: 'Number of Frames',
  x00280010: 'Rows',
  x00280011: 'Columns',
  x00280030: 'Pixel Spacing',
  x00280100: 'Bits Allocated',
  x00280101: 'Bits Stored',
  x00280102: 'High Bit',
  x00280103: 'Pixel Representation',
  x00281050: 'Window Center',
  x00281051: 'Window Width',
  x00281052: 'Rescale Intercept',
  x00281053: 'Rescale Slope',
  x00281054: 'Rescale Type',
  x52009229: 'Shared Functional Groups Sequence',
  x52009230: 'Per-frame Functional Groups Sequence',
  x7fe00010: 'Pixel Data',
};

const TEXT_VRS = new Set(['AE', 'AS', 'CS', 'DA', 'DS', 'DT', 'IS', 'LO', 'LT', 'PN', 'SH', 'ST', 'TM', 'UC', 'UI', 'UR', 'UT']);
/** The binary number VRs: bytes per value and how to read one. */
export const BINARY_NUMBER_VRS: Readonly<Record<string, { size: number; read: (view: DataView, at: number, little: boolean) => number }>> = {
  US: { size: 2, read: (v, at, le) => v.getUint16(at, le) },
  SS: { size: 2, read: (v, at, le) => v.getInt16(at, le) },
  UL: { size: 4, read: (v, at, le) => v.getUint32(at, le) },
  SL: { size: 4, read: (v, at, le) => v.getInt32(at, le) },
  FL: { size: 4, read: (v, at, le) => v.getFloat32(at, le) },
  FD: { size: 8, read: (v, at, le) => v.getFloat64(at, le) },
};
/** A value longer than this is cut: the browser lists attributes, it does not carry bulk data. */
const MAX_VALUE = 512;
const MAX_NUMBERS = 32;

function printable(bytes: Uint8Array): boolean {
  return bytes.every((b) => b === 0 || (b >= 0x20 && b < 0x7f) || b >= 0xa0 || b === 0x0a || b === 0x0d || b === 0x1b);
}

function valueOf(el: Element, bytes: Uint8Array, values: ValueReader, bigEndian: boolean): string | null {
  if (el.items) return `${el.items.length} item(s)`;
  if (el.tag === 'x7fe00010' || el.encapsulatedPixelData) return null;
  if (el.length <= 0 || el.length === 0xffffffff || el.dataOffset + el.length > bytes.length) return el.length === 0 ? '' : null;
  const vr = el.vr;
  const cut = (s: string) => (s.length > MAX_VALUE ? `${s.slice(0, MAX_VALUE)}…` : s);
  const binary = vr ? BINARY_NUMBER_VRS[vr] : undefined;
  if (binary) {
    const view = new DataView(bytes.buffer, bytes.byteOffset + el.dataOffset, el.length);
    const out: number[] = [];
    for (let at = 0; at + binary.size <= el.length && out.length < MAX_NUMBERS; at += binary.size) out.push(binary.read(view, at, !bigEndian));
    return out.join('\\') + (el.length / binary.size > MAX_NUMBERS ? '\\…' : '');
  }
  if (vr && TEXT_VRS.has(vr)) return cut(values.text(el.tag));
  if (!vr && el.length <= MAX_VALUE && printable(bytes.subarray(el.dataOffset, el.dataOffset + el.length))) return values.text(el.tag);
  if (!vr && el.length === 2) return String(byteParser(bigEndian).readUint16(bytes, el.dataOffset));
  return null;
}

function entries(elements: Elements, bytes: Uint8Array, values: ValueReader, bigEndian: boolean): TagEntry[] {
  return [...elements.values()].map((el) => ({
    tag: formatTag(el.tag),
    vr: el.vr ?? null,
    name: NAMES[el.tag] ?? null,
    length: el.length,
    value: valueOf(el, bytes, values, bigEndian),
  }));
}

/** The top-level tags of a DICOM file in file order, file meta first. */
export function topLevelTags(file: Uint8Array): TagEntry[] | { reason: string } {
  const read = topLevelElements(file);
  if ('reason' in read) return read;
  // File meta is always Explicit VR Little Endian (PS3.10 7.1).
  return [...entries(read.meta, read.bytes, read.metaValues, false), ...entries(read.elements, read.bytes, read.values, read.bigEndian)];
}
