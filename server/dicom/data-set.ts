/**
 * Walks the top-level elements of a data set with dicom-parser's element readers, one element
 * at a time, so that a failure can be reported with the byte offset and tag where it happened
 * (dicom-parser's own parseDicom only says "buffer overrun"). Sequence elements carry their
 * items as nested data sets (element.items[].dataSet), read by functional-groups.ts.
 */
import dicomParser from 'dicom-parser';
import type { ByteArrayParser, Element } from 'dicom-parser';

export type { Element };

export type Elements = ReadonlyMap<string, Element>;

export type WalkResult =
  | { ok: true; elements: Elements; end: number }
  | { ok: false; reason: string; elements: Elements; /** Offset of the element that stopped the walk. */ stoppedAt: number };

export type Encoding = { explicitVr: boolean; bigEndian: boolean };

export function byteParser(bigEndian: boolean): ByteArrayParser {
  return bigEndian ? dicomParser.bigEndianByteArrayParser : dicomParser.littleEndianByteArrayParser;
}

export function formatTag(tag: string): string {
  // dicom-parser writes tags as 'xggggeeee'.
  return `(${tag.slice(1, 5).toUpperCase()},${tag.slice(5, 9).toUpperCase()})`;
}

function peekTag(bytes: Uint8Array, at: number, bigEndian: boolean): string | null {
  if (at + 4 > bytes.length) return null;
  const p = byteParser(bigEndian);
  const g = p.readUint16(bytes, at);
  const e = p.readUint16(bytes, at + 2);
  return `x${g.toString(16).padStart(4, '0')}${e.toString(16).padStart(4, '0')}`;
}

function messageOf(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === 'string') return err;
  return 'unknown error';
}

const ITEM_TAG_LE = [0xfe, 0xff, 0x00, 0xe0];

/**
 * Pixel Data in an implicit VR data set. dicom-parser guesses "sequence" from the first item
 * tag, which is wrong for encapsulated pixel data (PS3.5 A.4); some writers put encapsulated
 * data, even with a defined length, in implicit VR data sets (pydicom's SC_rgb_jpeg.dcm), so we
 * read the fragments ourselves here.
 */
function readImplicitPixelData(bytes: Uint8Array, stream: InstanceType<typeof dicomParser.ByteStream>, warnings: string[]): Element {
  const tag = 'x7fe00010';
  stream.seek(4);
  const length = stream.readUint32();
  const element: Element = { tag, length, dataOffset: stream.position };
  const at = stream.position;
  const startsWithItem = ITEM_TAG_LE.every((b, i) => bytes[at + i] === b);
  if (length === 0xffffffff || startsWithItem) {
    dicomParser.findEndOfEncapsulatedElement(stream, element, warnings);
    if (length !== 0xffffffff) {
      element.length = length;
      stream.position = at + length;
    }
    return element;
  }
  stream.seek(length);
  return element;
}

/**
 * Reads elements from `start` until the end of `bytes`, or, given `onlyGroup`, until the first
 * element of another group (used to read only the File Meta group 0002, PS3.10 7.1).
 */
export function walkElements(
  bytes: Uint8Array,
  start: number,
  encoding: Encoding,
  onlyGroup?: number,
): WalkResult {
  const elements = new Map<string, Element>();
  if (start >= bytes.length) return { ok: true, elements, end: start };
  const stream = new dicomParser.ByteStream(byteParser(encoding.bigEndian), bytes, start);
  const warnings: string[] = [];
  while (stream.position < bytes.length) {
    const at = stream.position;
    const tag = peekTag(bytes, at, encoding.bigEndian);
    if (tag === null) {
      // Fewer than 4 bytes left: trailing padding some writers leave; not an element.
      if (bytes.subarray(at).every((b) => b === 0)) break;
      return { ok: false, reason: `truncated at byte ${bytes.length}: partial element header at offset ${at}`, elements, stoppedAt: at };
    }
    if (onlyGroup !== undefined && parseInt(tag.slice(1, 5), 16) !== onlyGroup) break;
    let element: Element;
    try {
      element = !encoding.explicitVr && tag === 'x7fe00010'
        ? readImplicitPixelData(bytes, stream, warnings)
        : encoding.explicitVr
        ? dicomParser.readDicomElementExplicit(stream, warnings)
        : dicomParser.readDicomElementImplicit(stream);
    } catch (err) {
      const msg = messageOf(err);
      if (/past end|overrun|maxPosition|out of range|beyond/i.test(msg) || at + 8 > bytes.length) {
        return { ok: false, reason: `truncated at byte ${bytes.length}: element ${formatTag(tag)} at offset ${at} runs past the end`, elements, stoppedAt: at };
      }
      // dicom-parser reads nested sequences recursively: a hostile nesting ends in a RangeError.
      if (err instanceof RangeError && /call stack/i.test(msg)) {
        return { ok: false, reason: `element ${formatTag(tag)} at offset ${at} nests sequences too deeply`, elements, stoppedAt: at };
      }
      return { ok: false, reason: `malformed element ${formatTag(tag)} at offset ${at}: ${msg}`, elements, stoppedAt: at };
    }
    const end = element.dataOffset + element.length;
    if (!Number.isFinite(element.length) || element.length < 0 || end > bytes.length || stream.position > bytes.length) {
      return {
        ok: false,
        reason: `truncated at byte ${bytes.length}: element ${formatTag(element.tag)} at offset ${at} declares ${element.length} bytes`,
        elements,
        stoppedAt: at,
      };
    }
    if (stream.position <= at) {
      return { ok: false, reason: `malformed element ${formatTag(element.tag)} at offset ${at}: no progress`, elements, stoppedAt: at };
    }
    elements.set(element.tag, element);
  }
  return { ok: true, elements, end: stream.position };
}
