/**
 * Encodes DICOM data sets as Explicit VR Little Endian (PS3.5 7.1.2), the one transfer syntax mia
 * writes: every element with its VR, values padded to even length (PS3.5 6.2: space for text,
 * NUL for UI and OB), sequences and items with defined lengths (PS3.5 7.5.1), elements in
 * ascending tag order at every level (PS3.5 7.1). Values are checked against their VR's length and
 * repertoire as they are built, so a value that does not fit is refused with its tag named
 * instead of being written as a file another system rejects.
 */

/** Text VRs whose values may use the Specific Character Set (PS3.5 6.1.2.3); others are ASCII. */
const CHARSET_VRS = new Set(['SH', 'LO', 'ST', 'LT', 'UT', 'PN', 'UC']);

/** Maximum length in characters (PS3.5 Table 6.2-1); PN is per component group. */
const MAX_CHARS: Readonly<Record<string, number>> = {
  AE: 16, AS: 4, CS: 16, DA: 8, DS: 16, DT: 26, IS: 12, LO: 64, LT: 10240, PN: 64, SH: 16, ST: 1024, TM: 14, UI: 64,
};

/** PS3.5 7.1.2: these VRs have a 2-byte reserved field and a 4-byte length. */
const LONG_HEADER_VRS = new Set(['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'SQ', 'SV', 'UC', 'UN', 'UR', 'UT', 'UV']);

const REPERTOIRE: Readonly<Record<string, RegExp>> = {
  AE: /^[\x20-\x5b\x5d-\x7e]*$/,
  AS: /^\d{3}[DWMY]$/,
  CS: /^[A-Z0-9_ ]*$/,
  DA: /^\d{8}$/,
  DS: /^ *[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)? *$/,
  DT: /^\d{4}(\d{2}(\d{2}(\d{2}(\d{2}(\d{2}(\.\d{1,6})?)?)?)?)?)?([+-]\d{4})?$/,
  IS: /^ *[+-]?\d+ *$/,
  TM: /^\d{2}(\d{2}(\d{2}(\.\d{1,6})?)?)?$/,
  UI: /^(0|[1-9]\d*)(\.(0|[1-9]\d*))*$/,
};

export type TextVr = 'AE' | 'AS' | 'CS' | 'DA' | 'DS' | 'DT' | 'IS' | 'LO' | 'LT' | 'PN' | 'SH' | 'ST' | 'TM' | 'UC' | 'UI' | 'UR' | 'UT';
export type NumberVr = 'US' | 'SS' | 'UL' | 'SL' | 'FL' | 'FD';
export type BytesVr = 'OB' | 'OW' | 'UN';

/** One element: a tag as a 32-bit number (group << 16 | element) and its typed value. */
export type Element =
  | { tag: number; vr: TextVr; values: readonly string[] }
  | { tag: number; vr: NumberVr; values: readonly number[] }
  | { tag: number; vr: BytesVr; bytes: Uint8Array }
  | { tag: number; vr: 'SQ'; items: readonly DataSet[] };

/** A data set: its elements in any order (the writer sorts them); a tag may appear once. */
export type DataSet = readonly Element[];

export class DicomWriteError extends Error {
  constructor(tag: number, message: string) {
    super(`${formatTag(tag)}: ${message}`);
    this.name = 'DicomWriteError';
  }
}

export function tagOf(group: number, element: number): number {
  return ((group << 16) | element) >>> 0;
}

export function formatTag(tag: number): string {
  const hex = tag.toString(16).toUpperCase().padStart(8, '0');
  return `(${hex.slice(0, 4)},${hex.slice(4)})`;
}

/** Why a text value does not fit its VR, or null when it does. */
export function textProblem(vr: TextVr, value: string): string | null {
  if (value.includes('\\') && vr !== 'LT' && vr !== 'ST' && vr !== 'UT' && vr !== 'UR') return 'a value may not hold a backslash (it separates values)';
  // PS3.5 6.1.3: of the control characters only LF, FF, CR (in ST, LT, UT) and ESC may appear.
  if (/[\0-\x09\x0b\x0e-\x1a\x1c-\x1f\x7f]/.test(value)) return 'control characters are not allowed';
  const max = MAX_CHARS[vr];
  if (vr === 'PN') {
    if (value.split('=').some((group) => [...group].length > 64)) return 'a person name component group is longer than 64 characters';
  } else if (max !== undefined && [...value].length > max) {
    return `longer than ${max} characters`;
  }
  if (!CHARSET_VRS.has(vr) && vr !== 'UR' && /[^\x20-\x7e]/.test(value)) return 'only ASCII is allowed in this VR';
  if (vr !== 'LT' && vr !== 'ST' && vr !== 'UT' && /[\n\r\f]/.test(value)) return 'line breaks are not allowed in this VR';
  const shape = REPERTOIRE[vr];
  if (shape && value !== '' && !shape.test(value)) return `not a valid ${vr} value`;
  return null;
}

/** A Decimal String of at most 16 characters for a finite number (PS3.5 6.2, DS). */
export function formatDecimal(n: number): string {
  if (!Number.isFinite(n)) throw new RangeError(`${n} has no DS form`);
  const plain = String(n);
  if (plain.length <= 16) return plain;
  for (let digits = 16; digits >= 1; digits--) {
    // toPrecision keeps trailing zeros ("1.500e+2"); they cost characters and say nothing.
    const [mantissa = '', exponent] = n.toPrecision(digits).split('e');
    const trimmed = mantissa.includes('.') ? mantissa.replace(/0+$/, '').replace(/\.$/, '') : mantissa;
    const s = exponent === undefined ? trimmed : `${trimmed}e${exponent}`;
    if (s.length <= 16) return s;
  }
  throw new RangeError(`${n} has no DS form of 16 characters`);
}

// ---- builders --------------------------------------------------------------------------------

/** A text element; `value` null or '' is an empty (zero-length) element, for Type 2 attributes. */
export function text(tag: number, vr: TextVr, value: string | readonly string[] | null): Element {
  const values = value === null ? [] : typeof value === 'string' ? (value === '' ? [] : [value]) : value;
  for (const v of values) {
    const problem = textProblem(vr, v);
    if (problem) throw new DicomWriteError(tag, problem);
  }
  return { tag, vr, values };
}

export function numbers(tag: number, vr: NumberVr, values: number | readonly number[]): Element {
  const list = typeof values === 'number' ? [values] : values;
  for (const v of list) {
    const ok = vr === 'FD' || vr === 'FL' ? Number.isFinite(v) : Number.isInteger(v) && v >= INT_RANGE[vr][0] && v <= INT_RANGE[vr][1];
    if (!ok) throw new DicomWriteError(tag, `${v} is not a valid ${vr} value`);
  }
  return { tag, vr, values: list };
}

export function bytes(tag: number, vr: BytesVr, value: Uint8Array): Element {
  return { tag, vr, bytes: value };
}

export function sequence(tag: number, items: readonly DataSet[]): Element {
  return { tag, vr: 'SQ', items };
}

const INT_RANGE: Readonly<Record<'US' | 'SS' | 'UL' | 'SL', readonly [number, number]>> = {
  US: [0, 0xffff],
  SS: [-0x8000, 0x7fff],
  UL: [0, 0xffffffff],
  SL: [-0x80000000, 0x7fffffff],
};

// ---- character set ---------------------------------------------------------------------------

function hasNonAscii(set: DataSet): boolean {
  return set.some((e) => ('values' in e && CHARSET_VRS.has(e.vr) && (e.values as readonly (string | number)[]).some((v) => typeof v === 'string' && /[^\x00-\x7f]/.test(v))) || ('items' in e && e.items.some(hasNonAscii)));
}

const SPECIFIC_CHARACTER_SET = 0x00080005;

/**
 * The data set with Specific Character Set (0008,0005) ISO_IR 192 (UTF-8, PS3.3 C.12.1.1.2) when
 * any text value, at any depth, is not ASCII; without the attribute readers assume ASCII. Items
 * inherit the top level's set (PS3.5 7.5.3), so it is written once.
 */
export function withCharacterSet(set: DataSet): DataSet {
  if (set.some((e) => e.tag === SPECIFIC_CHARACTER_SET) || !hasNonAscii(set)) return set;
  return [...set, text(SPECIFIC_CHARACTER_SET, 'CS', 'ISO_IR 192')];
}

// ---- encoding --------------------------------------------------------------------------------

const encoder = new TextEncoder();

function valueBytes(e: Element): Uint8Array {
  if ('bytes' in e) return e.bytes.length % 2 === 0 ? e.bytes : concat([e.bytes, new Uint8Array(1)]);
  if ('items' in e) throw new Error('sequences are encoded by encodeElement');
  if (e.vr === 'US' || e.vr === 'SS' || e.vr === 'UL' || e.vr === 'SL' || e.vr === 'FL' || e.vr === 'FD') {
    const size = e.vr === 'US' || e.vr === 'SS' ? 2 : e.vr === 'FD' ? 8 : 4;
    const out = new Uint8Array(size * e.values.length);
    const view = new DataView(out.buffer);
    e.values.forEach((v, i) => {
      const at = i * size;
      if (e.vr === 'US') view.setUint16(at, v, true);
      else if (e.vr === 'SS') view.setInt16(at, v, true);
      else if (e.vr === 'UL') view.setUint32(at, v, true);
      else if (e.vr === 'SL') view.setInt32(at, v, true);
      else if (e.vr === 'FL') view.setFloat32(at, v, true);
      else view.setFloat64(at, v, true);
    });
    return out;
  }
  const raw = encoder.encode((e.values as readonly string[]).join('\\'));
  if (raw.length % 2 === 0) return raw;
  const padded = new Uint8Array(raw.length + 1);
  padded.set(raw);
  padded[raw.length] = e.vr === 'UI' ? 0x00 : 0x20;
  return padded;
}

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function header(tag: number, vr: string, length: number): Uint8Array {
  const long = LONG_HEADER_VRS.has(vr);
  if (!long && length > 0xfffe) throw new DicomWriteError(tag, `value of ${length} bytes does not fit a ${vr} element`);
  if (length > 0xfffffffe) throw new DicomWriteError(tag, `value of ${length} bytes is too long`);
  const out = new Uint8Array(long ? 12 : 8);
  const view = new DataView(out.buffer);
  view.setUint16(0, tag >>> 16, true);
  view.setUint16(2, tag & 0xffff, true);
  out[4] = vr.charCodeAt(0);
  out[5] = vr.charCodeAt(1);
  if (long) view.setUint32(8, length, true);
  else view.setUint16(6, length, true);
  return out;
}

function itemHeader(tag: number, length: number): Uint8Array {
  const out = new Uint8Array(8);
  const view = new DataView(out.buffer);
  view.setUint16(0, tag >>> 16, true);
  view.setUint16(2, tag & 0xffff, true);
  view.setUint32(4, length, true);
  return out;
}

const ITEM = 0xfffee000;

function encodeElement(e: Element): Uint8Array {
  if ('items' in e) {
    const items = e.items.map((item) => {
      const body = encodeDataSet(item);
      return concat([itemHeader(ITEM, body.length), body]);
    });
    const body = concat(items);
    return concat([header(e.tag, 'SQ', body.length), body]);
  }
  const value = valueBytes(e);
  return concat([header(e.tag, e.vr, value.length), value]);
}

/** The data set's bytes, Explicit VR Little Endian, elements sorted by tag. */
export function encodeDataSet(set: DataSet): Uint8Array {
  const sorted = [...set].sort((a, b) => a.tag - b.tag);
  for (let i = 1; i < sorted.length; i++) {
    const tag = sorted[i]?.tag ?? 0;
    if (tag === sorted[i - 1]?.tag) throw new DicomWriteError(tag, 'appears twice in one data set');
  }
  return concat(sorted.map(encodeElement));
}
