/**
 * DICOM Part 10 files (PS3.10 7.1): a 128-byte preamble of zeros, "DICM", the File Meta
 * Information group 0002 (always Explicit VR Little Endian, with its group length first), then
 * the data set in the transfer syntax the meta names, here always Explicit VR Little Endian.
 */
import { encodeDataSet, numbers, bytes, tagOf, text, withCharacterSet, type DataSet } from '#server/dicom/write/data-set-writer.ts';
import { MIA_IMPLEMENTATION_CLASS_UID, MIA_IMPLEMENTATION_VERSION_NAME } from '#server/dicom/write/implementation.ts';

export const EXPLICIT_VR_LITTLE_ENDIAN_UID = '1.2.840.10008.1.2.1';

const PREAMBLE = 128;
const MAGIC = new TextEncoder().encode('DICM');

export type Part10Identity = { sopClassUid: string; sopInstanceUid: string };

/**
 * The file's bytes. `dataSet` must hold SOP Class UID (0008,0016) and SOP Instance UID
 * (0008,0018) equal to `identity` (the meta's media storage UIDs repeat them, PS3.10 7.1);
 * Specific Character Set is added when a text value needs UTF-8.
 */
export function writePart10(dataSet: DataSet, identity: Part10Identity): Uint8Array {
  const body = dataSet.filter((e) => e.tag >>> 16 !== 0x0002);
  const meta = encodeDataSet([
    bytes(tagOf(0x0002, 0x0001), 'OB', Uint8Array.of(0x00, 0x01)),
    text(tagOf(0x0002, 0x0002), 'UI', identity.sopClassUid),
    text(tagOf(0x0002, 0x0003), 'UI', identity.sopInstanceUid),
    text(tagOf(0x0002, 0x0010), 'UI', EXPLICIT_VR_LITTLE_ENDIAN_UID),
    text(tagOf(0x0002, 0x0012), 'UI', MIA_IMPLEMENTATION_CLASS_UID),
    text(tagOf(0x0002, 0x0013), 'SH', MIA_IMPLEMENTATION_VERSION_NAME),
  ]);
  const groupLength = encodeDataSet([numbers(tagOf(0x0002, 0x0000), 'UL', meta.length)]);
  const data = encodeDataSet(withCharacterSet(body));
  const out = new Uint8Array(PREAMBLE + MAGIC.length + groupLength.length + meta.length + data.length);
  let at = PREAMBLE;
  for (const part of [MAGIC, groupLength, meta, data]) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}
