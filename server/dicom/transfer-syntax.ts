/**
 * The transfer syntaxes we know by UID (PS3.5 Section 10 and Annex A; PS3.6 Annex A), with
 * what the parser and the pixel decoder need to know about each: byte order, whether VRs are
 * explicit, whether the data set is deflated, and how pixel data is encoded.
 */

export type PixelEncoding =
  | 'native'
  | 'rle'
  | 'jpeg-baseline'
  | 'jpeg-extended'
  | 'jpeg-lossless'
  | 'jpeg-ls'
  | 'jpeg-2000'
  | 'htj2k'
  | 'unsupported';

export type TransferSyntax = {
  uid: string;
  name: string;
  explicitVr: boolean;
  bigEndian: boolean;
  deflated: boolean;
  encapsulated: boolean;
  encoding: PixelEncoding;
  lossy: boolean;
};

function ts(
  uid: string,
  name: string,
  encoding: PixelEncoding,
  extra: Partial<Pick<TransferSyntax, 'explicitVr' | 'bigEndian' | 'deflated' | 'lossy'>> = {},
): TransferSyntax {
  return {
    uid,
    name,
    explicitVr: extra.explicitVr ?? true,
    bigEndian: extra.bigEndian ?? false,
    deflated: extra.deflated ?? false,
    encapsulated: encoding !== 'native',
    encoding,
    lossy: extra.lossy ?? false,
  };
}

export const IMPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2';
export const EXPLICIT_VR_LITTLE_ENDIAN = '1.2.840.10008.1.2.1';
export const EXPLICIT_VR_BIG_ENDIAN = '1.2.840.10008.1.2.2';

const TABLE: readonly TransferSyntax[] = [
  ts(IMPLICIT_VR_LITTLE_ENDIAN, 'Implicit VR Little Endian', 'native', { explicitVr: false }),
  ts(EXPLICIT_VR_LITTLE_ENDIAN, 'Explicit VR Little Endian', 'native'),
  ts('1.2.840.10008.1.2.1.99', 'Deflated Explicit VR Little Endian', 'native', { deflated: true }),
  ts(EXPLICIT_VR_BIG_ENDIAN, 'Explicit VR Big Endian', 'native', { bigEndian: true }),
  ts('1.2.840.10008.1.2.4.50', 'JPEG Baseline (Process 1)', 'jpeg-baseline', { lossy: true }),
  ts('1.2.840.10008.1.2.4.51', 'JPEG Extended (Process 2 & 4)', 'jpeg-extended', { lossy: true }),
  ts('1.2.840.10008.1.2.4.57', 'JPEG Lossless, Non-Hierarchical (Process 14)', 'jpeg-lossless'),
  ts('1.2.840.10008.1.2.4.70', 'JPEG Lossless, Non-Hierarchical, First-Order Prediction (Process 14 [Selection Value 1])', 'jpeg-lossless'),
  ts('1.2.840.10008.1.2.4.80', 'JPEG-LS Lossless', 'jpeg-ls'),
  ts('1.2.840.10008.1.2.4.81', 'JPEG-LS Lossy (Near-Lossless)', 'jpeg-ls', { lossy: true }),
  ts('1.2.840.10008.1.2.4.90', 'JPEG 2000 Image Compression (Lossless Only)', 'jpeg-2000'),
  ts('1.2.840.10008.1.2.4.91', 'JPEG 2000 Image Compression', 'jpeg-2000', { lossy: true }),
  ts('1.2.840.10008.1.2.4.201', 'High-Throughput JPEG 2000 (Lossless Only)', 'htj2k'),
  ts('1.2.840.10008.1.2.4.202', 'High-Throughput JPEG 2000 with RPCL Options (Lossless Only)', 'htj2k'),
  ts('1.2.840.10008.1.2.4.203', 'High-Throughput JPEG 2000', 'htj2k', { lossy: true }),
  ts('1.2.840.10008.1.2.5', 'RLE Lossless', 'rle'),
  // Known so that rejections can name them; we have no decoder for these.
  ts('1.2.840.10008.1.2.4.52', 'JPEG Extended (Process 3 & 5) (retired)', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.53', 'JPEG Spectral Selection, Non-Hierarchical (retired)', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.55', 'JPEG Full Progression, Non-Hierarchical (retired)', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.92', 'JPEG 2000 Part 2 Multi-component (Lossless Only)', 'unsupported'),
  ts('1.2.840.10008.1.2.4.93', 'JPEG 2000 Part 2 Multi-component', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.94', 'JPIP Referenced', 'unsupported'),
  ts('1.2.840.10008.1.2.4.95', 'JPIP Referenced Deflate', 'unsupported'),
  ts('1.2.840.10008.1.2.4.100', 'MPEG2 Main Profile / Main Level', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.101', 'MPEG2 Main Profile / High Level', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.102', 'MPEG-4 AVC/H.264 High Profile / Level 4.1', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.103', 'MPEG-4 AVC/H.264 BD-compatible High Profile / Level 4.1', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.104', 'MPEG-4 AVC/H.264 High Profile / Level 4.2 For 2D Video', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.105', 'MPEG-4 AVC/H.264 High Profile / Level 4.2 For 3D Video', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.106', 'MPEG-4 AVC/H.264 Stereo High Profile / Level 4.2', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.107', 'HEVC/H.265 Main Profile / Level 5.1', 'unsupported', { lossy: true }),
  ts('1.2.840.10008.1.2.4.108', 'HEVC/H.265 Main 10 Profile / Level 5.1', 'unsupported', { lossy: true }),
];

const BY_UID = new Map(TABLE.map((t) => [t.uid, t]));

export function findTransferSyntax(uid: string): TransferSyntax | undefined {
  return BY_UID.get(uid);
}

/** "unsupported transfer syntax X (name)" in one place, for parse and decode alike. */
export function describeTransferSyntax(uid: string): string {
  const t = BY_UID.get(uid);
  return t ? `${uid} (${t.name})` : `${uid} (unknown)`;
}
