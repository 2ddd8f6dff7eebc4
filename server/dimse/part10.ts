/**
 * The Part 10 file meta information (PS3.10 7.1): written by the SCP in front of the data set
 * bytes a C-STORE delivered, so the archived file keeps those bytes as sent; and read by the SCU
 * to learn a file's SOP class, instance and transfer syntax and where its data set starts.
 */
import { open } from 'node:fs/promises';
import { EXPLICIT_VR_LITTLE_ENDIAN } from '#server/dicom/transfer-syntax.ts';
import { trimPadding } from '#server/dicom/values.ts';

/** mia's implementation class UID (a UUID-derived 2.25 root, PS3.5 B.2) and version name. */
export const IMPLEMENTATION_CLASS_UID = '2.25.216306394366287496614245447961380318211';
export const IMPLEMENTATION_VERSION_NAME = 'MIA_0_1';

function element(group: number, elementNo: number, vr: string, value: Buffer): Buffer {
  const long = vr === 'OB';
  const header = Buffer.alloc(long ? 12 : 8);
  header.writeUInt16LE(group, 0);
  header.writeUInt16LE(elementNo, 2);
  header.write(vr, 4, 'latin1');
  if (long) header.writeUInt32LE(value.length, 8);
  else header.writeUInt16LE(value.length, 6);
  return Buffer.concat([header, value]);
}

const ui = (uid: string): Buffer => Buffer.from(uid.length % 2 === 1 ? uid + '\0' : uid, 'latin1');
const shortText = (text: string): Buffer => Buffer.from(text.length % 2 === 1 ? text + ' ' : text, 'latin1');

export type MetaFields = { sopClassUid: string; sopInstanceUid: string; transferSyntaxUid: string; sourceAeTitle: string };

/** Preamble, DICM, and group 0002 in Explicit VR Little Endian, as PS3.10 requires. */
export function encodeFileMeta(meta: MetaFields): Buffer {
  const body = Buffer.concat([
    element(0x0002, 0x0001, 'OB', Buffer.from([0x00, 0x01])),
    element(0x0002, 0x0002, 'UI', ui(meta.sopClassUid)),
    element(0x0002, 0x0003, 'UI', ui(meta.sopInstanceUid)),
    element(0x0002, 0x0010, 'UI', ui(meta.transferSyntaxUid)),
    element(0x0002, 0x0012, 'UI', ui(IMPLEMENTATION_CLASS_UID)),
    element(0x0002, 0x0013, 'SH', shortText(IMPLEMENTATION_VERSION_NAME)),
    element(0x0002, 0x0016, 'AE', shortText(meta.sourceAeTitle)),
  ]);
  const length = Buffer.alloc(4);
  length.writeUInt32LE(body.length, 0);
  return Buffer.concat([Buffer.alloc(128), Buffer.from('DICM', 'latin1'), element(0x0002, 0x0000, 'UL', length), body]);
}

export type FileMeta = { sopClassUid: string; sopInstanceUid: string; transferSyntaxUid: string; dataSetOffset: number; size: number };

/** File meta groups are a few hundred bytes; one larger than this is not read. */
const MAX_META_BYTES = 64 * 1024;
const LONG_VRS = new Set(['OB', 'OD', 'OF', 'OL', 'OV', 'OW', 'SQ', 'UC', 'UN', 'UR', 'UT']);

/** The meta information of a Part 10 file, or why it has none we can send from. */
export async function readFileMeta(path: string): Promise<{ ok: true; meta: FileMeta } | { ok: false; reason: string }> {
  const handle = await open(path, 'r');
  try {
    const size = (await handle.stat()).size;
    const head = Buffer.alloc(Math.min(size, MAX_META_BYTES));
    await handle.read(head, 0, head.length, 0);
    if (head.length < 132 || head.toString('latin1', 128, 132) !== 'DICM') return { ok: false, reason: 'not a DICOM Part 10 file (no DICM prefix)' };
    const fields = new Map<number, string>();
    let at = 132;
    while (at + 8 <= head.length && head.readUInt16LE(at) === 0x0002) {
      const elementNo = head.readUInt16LE(at + 2);
      const vr = head.toString('latin1', at + 4, at + 6);
      const long = LONG_VRS.has(vr);
      if (long && at + 12 > head.length) break;
      const length = long ? head.readUInt32LE(at + 8) : head.readUInt16LE(at + 6);
      const start = at + (long ? 12 : 8);
      if (start + length > head.length) return { ok: false, reason: 'file meta information is truncated or longer than 64 KiB' };
      fields.set(elementNo, trimPadding(head.toString('latin1', start, start + length)));
      at = start + length;
    }
    const sopClassUid = fields.get(0x0002) ?? '';
    const sopInstanceUid = fields.get(0x0003) ?? '';
    // A meta header without a transfer syntax is invalid; Explicit VR Little Endian is what
    // PS3.10 says the rest of such a header is in, the only guess that is not arbitrary.
    const transferSyntaxUid = fields.get(0x0010) ?? EXPLICIT_VR_LITTLE_ENDIAN;
    if (!sopClassUid || !sopInstanceUid) return { ok: false, reason: 'file meta information lacks the SOP class or instance UID' };
    return { ok: true, meta: { sopClassUid, sopInstanceUid, transferSyntaxUid, dataSetOffset: at, size } };
  } finally {
    await handle.close();
  }
}
