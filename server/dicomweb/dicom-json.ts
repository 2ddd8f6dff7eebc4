/**
 * A stored instance as the DICOM JSON model (PS3.18 F.2) for WADO-RS metadata: every element of
 * the data set, sequences nested, numbers as numbers, person names as component groups, and
 * bulk data (Pixel Data, large binary values) as a BulkDataURI instead of its bytes. The walk
 * is bounded: sequences deeper than MAX_DEPTH and multi-valued elements longer than MAX_VALUES
 * are cut, so a hostile file costs at most what its size already allowed in.
 */
import type { DataSet } from 'dicom-parser';
import { byteParser, type Element } from '#server/dicom/data-set.ts';
import { textDecoderFor } from '#server/dicom/charset.ts';
import { topLevelElements } from '#server/dicom/parse.ts';
import { BINARY_NUMBER_VRS } from '#server/dicom/tags.ts';
import { implicitVr } from '#server/dicomweb/implicit-vr.ts';
import { personName, sortedByTag, type DicomJson } from '#server/dicomweb/qido.ts';
import { trimPadding } from '#server/dicom/values.ts';

const MAX_DEPTH = 16;
const MAX_VALUES = 65_536;
/** Binary values up to this size go inline (base64); larger ones are bulk data. */
const MAX_INLINE_BYTES = 64 * 1024;

const STRING_VRS = new Set(['AE', 'AS', 'CS', 'DA', 'DT', 'LO', 'SH', 'TM', 'UC', 'UI']);
const SINGLE_TEXT_VRS = new Set(['LT', 'ST', 'UT', 'UR']);

type Context = {
  bytes: Uint8Array;
  bigEndian: boolean;
  explicitVr: boolean;
  decode: (bytes: Uint8Array) => string;
  /** Where a bulk data element of the top level can be fetched (PS3.18 F.2.6). */
  bulkDataUri: (tag: string) => string | null;
};

export type MetadataResult = { ok: true; json: DicomJson } | { ok: false; reason: string };

function tagOf(element: Element): string {
  return element.tag.slice(1).toUpperCase();
}

function vrOf(element: Element, ctx: Context): string {
  if (element.items) return 'SQ';
  if (ctx.explicitVr && element.vr) return element.vr;
  return implicitVr(tagOf(element));
}

function splitText(text: string): string[] {
  return text.split('\\');
}

function valueBytes(element: Element, ctx: Context): Uint8Array | null {
  if (element.length <= 0 || element.length === 0xffffffff) return null;
  const end = element.dataOffset + element.length;
  if (end > ctx.bytes.length) return null;
  return ctx.bytes.subarray(element.dataOffset, end);
}

function numbersOf(vr: string, raw: Uint8Array, ctx: Context): number[] | null {
  const spec = BINARY_NUMBER_VRS[vr];
  if (!spec) return null;
  const count = Math.floor(raw.length / spec.size);
  if (count > MAX_VALUES) return null;
  const view = new DataView(raw.buffer, raw.byteOffset, raw.length);
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push(spec.read(view, i * spec.size, !ctx.bigEndian));
  return out.map((n) => (Number.isFinite(n) ? n : 0));
}

function attributeOf(element: Element, ctx: Context, depth: number, topLevel: boolean): { vr: string; [key: string]: unknown } | null {
  const vr = vrOf(element, ctx);
  const tag = tagOf(element);
  if (vr === 'SQ') {
    if (depth >= MAX_DEPTH) return { vr };
    const items = (element.items ?? []).slice(0, MAX_VALUES).map((item) => (item.dataSet ? dataSetJson(item.dataSet, ctx, depth + 1) : {}));
    return items.length === 0 ? { vr } : { vr, Value: items };
  }
  if (tag === '7FE00010' || element.encapsulatedPixelData) {
    const uri = topLevel ? ctx.bulkDataUri(tag) : null;
    return uri ? { vr: vr === 'UN' ? 'OW' : vr, BulkDataURI: uri } : { vr: vr === 'UN' ? 'OW' : vr };
  }
  const raw = valueBytes(element, ctx);
  if (!raw) return { vr };
  if (STRING_VRS.has(vr)) {
    const text = trimPadding(ctx.decode(raw));
    const values = splitText(text).map((v) => v.trim());
    return values.length > MAX_VALUES ? { vr } : { vr, Value: values.map((v) => (v === '' ? null : v)) };
  }
  if (SINGLE_TEXT_VRS.has(vr)) return { vr, Value: [trimPadding(ctx.decode(raw))] };
  if (vr === 'PN') {
    const text = trimPadding(ctx.decode(raw));
    return { vr, Value: splitText(text).slice(0, MAX_VALUES).map((v) => (v.trim() === '' ? null : personName(v.trim()))) };
  }
  if (vr === 'IS' || vr === 'DS') {
    const values = splitText(trimPadding(ctx.decode(raw))).slice(0, MAX_VALUES);
    // DICOM JSON carries IS and DS as numbers; a value that is not one is dropped, not invented.
    return { vr, Value: values.map((v) => (v.trim() === '' ? null : Number(v.trim()))).map((n) => (n === null || Number.isFinite(n) ? n : null)) };
  }
  if (vr === 'AT') {
    const p = byteParser(ctx.bigEndian);
    const values: string[] = [];
    for (let at = 0; at + 4 <= raw.length && values.length < MAX_VALUES; at += 4) {
      values.push(`${p.readUint16(raw, at).toString(16).padStart(4, '0')}${p.readUint16(raw, at + 2).toString(16).padStart(4, '0')}`.toUpperCase());
    }
    return { vr, Value: values };
  }
  const numbers = numbersOf(vr, raw, ctx);
  if (numbers) return { vr, Value: numbers };
  // OB, OW, OF, OD, OL, OV, UN and anything unknown: bytes.
  if (raw.length <= MAX_INLINE_BYTES) return { vr, InlineBinary: Buffer.from(raw.buffer, raw.byteOffset, raw.length).toString('base64') };
  const uri = topLevel ? ctx.bulkDataUri(tag) : null;
  return uri ? { vr, BulkDataURI: uri } : { vr };
}

function include(tag: string): boolean {
  // Group lengths are encoding detail (PS3.18 F.2 leaves them out); item delimiters are not attributes.
  return !tag.endsWith('0000') && !tag.startsWith('FFFE');
}

function elementsJson(elements: Iterable<Element>, ctx: Context, depth: number, topLevel: boolean): DicomJson {
  const out: DicomJson = {};
  for (const element of elements) {
    const tag = tagOf(element);
    if (!include(tag)) continue;
    const attribute = attributeOf(element, ctx, depth, topLevel);
    if (attribute) out[tag] = attribute as DicomJson[string];
  }
  return sortedByTag(out);
}

function dataSetJson(dataSet: DataSet, ctx: Context, depth: number): DicomJson {
  return elementsJson(Object.values(dataSet.elements), ctx, depth, false);
}

/**
 * The data set of a stored file as DICOM JSON. `bulkDataUri` names where Pixel Data and other
 * large top-level values can be retrieved (null: leave them without a value).
 */
export function instanceMetadata(file: Uint8Array, bulkDataUri: (tag: string) => string | null): MetadataResult {
  const read = topLevelElements(file);
  if ('reason' in read) return { ok: false, reason: read.reason };
  const charset = read.values.has('x00080005') ? read.values.code('x00080005') : undefined;
  const transferSyntax = read.metaValues.code('x00020010');
  const ctx: Context = {
    bytes: read.bytes,
    bigEndian: read.bigEndian,
    explicitVr: transferSyntax !== '1.2.840.10008.1.2',
    decode: textDecoderFor(charset),
    bulkDataUri,
  };
  const json = elementsJson(read.elements.values(), ctx, 0, true);
  return { ok: true, json };
}
