/**
 * The import edge for DICOM files: bytes in, one typed `DicomInstance` out, or a plain reason
 * why not. Nothing downstream reads tags again. Never throws on bad input, because imports
 * walk folders and discs full of files that are not DICOM, are truncated, or are odd.
 */
import { choosePixelSpacing, type PixelSpacingSource } from '#common/pixel-spacing.ts';
import { walkElements, type Element, type Elements } from '#server/dicom/data-set.ts';
import { readFunctionalGroups, type FrameValues } from '#server/dicom/functional-groups.ts';
import { inflateDataSet, inflateDataSetSync } from '#server/dicom/inflate.ts';
import { nativeFrameLength } from '#server/dicom/native.ts';
import { valueReader, type ValueReader } from '#server/dicom/values.ts';
import { parseUid, type Uid } from '#server/dicom/uid.ts';
import {
  EXPLICIT_VR_BIG_ENDIAN,
  EXPLICIT_VR_LITTLE_ENDIAN,
  IMPLICIT_VR_LITTLE_ENDIAN,
  describeTransferSyntax,
  findTransferSyntax,
  type TransferSyntax,
} from '#server/dicom/transfer-syntax.ts';

export type { FrameValues, Uid };

/** Where the pixel data sits. Offsets index the data set bytes (see `datasetBytes`). */
export type PixelDataLocation =
  | { encapsulated: false; offset: number; length: number }
  | {
      encapsulated: true;
      /** Data of each fragment item, in order. */
      fragments: ReadonlyArray<{ offset: number; length: number }>;
      /** Offset of each fragment's item tag from the first fragment's item tag (PS3.5 A.4). */
      fragmentItemOffsets: readonly number[];
      basicOffsetTable: readonly number[];
    };

export type DicomInstance = {
  patientId: string;
  patientName: string;
  patientBirthDate: string;
  patientSex: string;
  studyInstanceUid: Uid;
  studyDate: string;
  studyTime: string;
  studyDescription: string;
  accessionNumber: string;
  seriesInstanceUid: Uid;
  seriesNumber: number | null;
  seriesDescription: string;
  modality: string;
  bodyPart: string;
  sopInstanceUid: Uid;
  sopClassUid: Uid;
  transferSyntaxUid: Uid;
  instanceNumber: number | null;
  imagePositionPatient: [number, number, number] | null;
  imageOrientationPatient: [number, number, number, number, number, number] | null;
  /**
   * Row spacing then column spacing, in mm (PS3.3 10.7.1.3), as common/pixel-spacing.ts chooses
   * it: Pixel Spacing, else Imager Pixel Spacing (detector plane) divided by the magnification
   * factor when there is one.
   */
  pixelSpacing: [number, number] | null;
  /** What pixelSpacing is: in the patient, at the detector, corrected or calibrated; null without one. */
  pixelSpacingSource: PixelSpacingSource | null;
  sliceThickness: number | null;
  imageType: string[];
  rows: number;
  columns: number;
  numberOfFrames: number;
  samplesPerPixel: number;
  photometricInterpretation: string;
  bitsAllocated: number;
  bitsStored: number;
  highBit: number;
  pixelRepresentation: 0 | 1;
  planarConfiguration: 0 | 1;
  rescaleSlope: number;
  rescaleIntercept: number;
  windowCenter: number[];
  windowWidth: number[];
  hasPixelData: boolean;
  /** How the data set was encoded once meta info and guessing are done. */
  bigEndian: boolean;
  deflated: boolean;
  pixelData: PixelDataLocation | null;
  /**
   * Per-frame values from the Multi-frame Functional Groups (PS3.3 C.7.6.16), one per frame;
   * empty for images without them (classic ones). Read through `frameValues`. The top-level
   * fields above then hold frame 0's values where the file has no top-level attribute.
   */
  frames: readonly FrameValues[];
  /** Why functional groups could not be read frame by frame (frames then hold shared values). */
  functionalGroupsProblem: string | null;
};

/** The rescale, geometry and windows of one frame: its functional groups', else the instance's. */
export function frameValues(instance: DicomInstance, frame: number): FrameValues {
  return (
    instance.frames[frame] ?? {
      rescaleSlope: instance.rescaleSlope,
      rescaleIntercept: instance.rescaleIntercept,
      imagePositionPatient: instance.imagePositionPatient,
      imageOrientationPatient: instance.imageOrientationPatient,
      pixelSpacing: instance.pixelSpacing,
      sliceThickness: instance.sliceThickness,
      windowCenter: instance.windowCenter,
      windowWidth: instance.windowWidth,
    }
  );
}

export type ParseResult = { ok: true; instance: DicomInstance } | { ok: false; reason: string };

const DICOMDIR_SOP_CLASS = '1.2.840.10008.1.3.10';

const T = {
  transferSyntax: 'x00020010',
  mediaSopClass: 'x00020002',
  charset: 'x00080005',
  imageType: 'x00080008',
  sopClass: 'x00080016',
  sopInstance: 'x00080018',
  studyDate: 'x00080020',
  studyTime: 'x00080030',
  accession: 'x00080050',
  modality: 'x00080060',
  studyDescription: 'x00081030',
  seriesDescription: 'x0008103e',
  patientName: 'x00100010',
  patientId: 'x00100020',
  birthDate: 'x00100030',
  sex: 'x00100040',
  bodyPart: 'x00180015',
  sliceThickness: 'x00180050',
  studyUid: 'x0020000d',
  seriesUid: 'x0020000e',
  seriesNumber: 'x00200011',
  instanceNumber: 'x00200013',
  position: 'x00200032',
  orientation: 'x00200037',
  samples: 'x00280002',
  photometric: 'x00280004',
  planar: 'x00280006',
  frames: 'x00280008',
  rows: 'x00280010',
  columns: 'x00280011',
  spacing: 'x00280030',
  imagerSpacing: 'x00181164',
  magnification: 'x00181114',
  spacingCalibration: 'x00280a02',
  bitsAllocated: 'x00280100',
  bitsStored: 'x00280101',
  highBit: 'x00280102',
  pixelRepresentation: 'x00280103',
  windowCenter: 'x00281050',
  windowWidth: 'x00281051',
  intercept: 'x00281052',
  slope: 'x00281053',
  pixelData: 'x7fe00010',
} as const;

type Layout = {
  /** Bytes the data set lives in: the input, or input with the deflated part inflated. */
  bytes: Uint8Array;
  dataSetStart: number;
  syntax: TransferSyntax;
  meta: Elements;
};

const fail = (reason: string): ParseResult => ({ ok: false, reason });

const isUpper = (b: number | undefined): boolean => b !== undefined && b >= 0x41 && b <= 0x5a;

/**
 * Without File Meta Information (PS3.10 7.1) the encoding must be guessed. The first element of
 * a real data set has a small even group (0008 usually); reading that group both ways tells the
 * byte order, and two upper-case letters after the tag mean an explicit VR.
 */
function guessEncoding(bytes: Uint8Array): TransferSyntax | null {
  if (bytes.length < 8) return null;
  const le = (bytes[0] ?? 0) | ((bytes[1] ?? 0) << 8);
  const be = ((bytes[0] ?? 0) << 8) | (bytes[1] ?? 0);
  const explicit = isUpper(bytes[4]) && isUpper(bytes[5]);
  const plausible = (g: number): boolean => g >= 0x0002 && g <= 0x0010 && g % 2 === 0;
  if (plausible(le)) {
    return findTransferSyntax(explicit ? EXPLICIT_VR_LITTLE_ENDIAN : IMPLICIT_VR_LITTLE_ENDIAN) ?? null;
  }
  if (plausible(be) && explicit) return findTransferSyntax(EXPLICIT_VR_BIG_ENDIAN) ?? null;
  return null;
}

const hasMagic = (bytes: Uint8Array, at: number): boolean =>
  bytes[at] === 0x44 && bytes[at + 1] === 0x49 && bytes[at + 2] === 0x43 && bytes[at + 3] === 0x4d;

const inflatedCache = new WeakMap<Uint8Array, Uint8Array>();

/** How the data set is encoded and where it starts, before any inflating. */
type Encoding = { dataSetStart: number; syntax: TransferSyntax; meta: Elements };

function encodingOf(bytes: Uint8Array): Encoding | { reason: string } {
  const metaStart = hasMagic(bytes, 128) ? 132 : hasMagic(bytes, 0) ? 4 : -1;
  if (metaStart < 0) {
    const guessed = guessEncoding(bytes);
    if (!guessed) return { reason: 'not a DICOM file' };
    return { dataSetStart: 0, syntax: guessed, meta: new Map() };
  }
  // File Meta Information is always Explicit VR Little Endian (PS3.10 7.1).
  const meta = walkElements(bytes, metaStart, { explicitVr: true, bigEndian: false }, 0x0002);
  if (!meta.ok) return { reason: `bad file meta information: ${meta.reason}` };
  const tsElement = meta.elements.get(T.transferSyntax);
  const metaValues = valueReader(bytes, meta.elements, false, undefined);
  let syntax: TransferSyntax | undefined;
  if (tsElement) {
    const uid = metaValues.code(T.transferSyntax);
    syntax = findTransferSyntax(uid);
    if (!syntax) return { reason: `unsupported transfer syntax ${describeTransferSyntax(uid)}` };
  } else {
    // (0002,0010) is Type 1, but some writers drop it; fall back to guessing as without meta.
    syntax = guessEncoding(bytes.subarray(meta.end)) ?? undefined;
    if (!syntax) return { reason: 'missing Transfer Syntax UID (0002,0010) and data set encoding not recognisable' };
  }
  if (metaValues.code(T.mediaSopClass) === DICOMDIR_SOP_CLASS) return { reason: 'a DICOMDIR media directory, not an instance' };
  if (syntax.explicitVr && !syntax.deflated && meta.end + 6 <= bytes.length && !(isUpper(bytes[meta.end + 4]) && isUpper(bytes[meta.end + 5]))) {
    // Leniency: some writers (e.g. SC_rgb_jpeg.dcm in pydicom's corpus) declare an explicit VR
    // syntax but write the data set in implicit VR; pydicom and dcmtk read these too.
    syntax = { ...syntax, explicitVr: false };
  }
  return { dataSetStart: meta.end, syntax, meta: meta.elements };
}

function layout(bytes: Uint8Array, encoding: Encoding | { reason: string } = encodingOf(bytes)): Layout | { reason: string } {
  if ('reason' in encoding) return encoding;
  if (!encoding.syntax.deflated) return { bytes, ...encoding };
  let inflated = inflatedCache.get(bytes);
  if (!inflated) {
    // Only callers that skipped `readDicom` get here, with the absolute cap alone.
    const result = inflateDataSetSync(bytes, encoding.dataSetStart);
    if (!result.ok) return { reason: result.reason };
    inflated = result.bytes;
    inflatedCache.set(bytes, inflated);
  }
  return { bytes: inflated, ...encoding };
}

/**
 * The bytes that `PixelDataLocation` offsets refer to: the input itself, except for deflated
 * files, whose data set is inflated again (cached per input array).
 */
export function datasetBytes(bytes: Uint8Array, instance: DicomInstance): Uint8Array {
  if (!instance.deflated) return bytes;
  const cached = inflatedCache.get(bytes);
  if (cached) return cached;
  const l = layout(bytes);
  if ('reason' in l) throw new Error(l.reason);
  return l.bytes;
}

function uidField(values: ValueReader, tag: string, name: string): { uid: Uid } | { reason: string } {
  if (!values.has(tag) || values.code(tag) === '') return { reason: `missing ${name}` };
  const parsed = parseUid(values.code(tag));
  return parsed.ok ? { uid: parsed.uid } : { reason: `invalid ${name}: ${parsed.reason}` };
}

function fixed<N extends number>(values: number[], n: N): number[] | null {
  return values.length === n ? values : null;
}

function pixelLocation(el: Element): PixelDataLocation {
  if (el.encapsulatedPixelData && el.fragments) {
    return {
      encapsulated: true,
      fragments: el.fragments.map((f) => ({ offset: f.position, length: f.length })),
      fragmentItemOffsets: el.fragments.map((f) => f.offset),
      basicOffsetTable: el.basicOffsetTable ?? [],
    };
  }
  return { encapsulated: false, offset: el.dataOffset, length: el.length };
}

/**
 * `parseDicom` for the server's paths: a deflated data set is inflated off the event loop,
 * under caps that tighten as the data set declares its size (inflate.ts), before parsing.
 */
export async function readDicom(bytes: Uint8Array): Promise<ParseResult> {
  if (bytes.length < 8) return fail('not a DICOM file');
  // Read once here and handed on: this is every import's path.
  const encoding = encodingOf(bytes);
  if (!('reason' in encoding) && encoding.syntax.deflated && !inflatedCache.has(bytes)) {
    const inflated = await inflateDataSet(bytes, encoding.dataSetStart);
    if (!inflated.ok) return fail(inflated.reason);
    inflatedCache.set(bytes, inflated.bytes);
  }
  return parseSafely(bytes, encoding);
}

/** The most samples (rows x columns x samples per pixel) one frame may have. */
export const MAX_SAMPLES_PER_FRAME = 2 ** 28;

/**
 * Whether the pixel data can hold what the attributes describe (PS3.5 8.1.1, A.4), checked
 * here once so that no later loop or allocation sized by Number of Frames, Rows or Columns
 * runs on a value the file's own bytes do not back.
 */
function pixelDataReason(i: DicomInstance): string | null {
  const px = i.pixelData;
  if (!px) return null;
  const samples = i.rows * i.columns * i.samplesPerPixel;
  if (samples > MAX_SAMPLES_PER_FRAME) {
    return `frame of ${i.rows} x ${i.columns} x ${i.samplesPerPixel} samples is larger than the ${MAX_SAMPLES_PER_FRAME} mia reads`;
  }
  if (px.encapsulated) {
    if (px.fragments.length === 0) return 'encapsulated Pixel Data holds no fragments';
    // A fragment never holds more than one frame (PS3.5 A.4), so there are at least as many.
    if (i.numberOfFrames > px.fragments.length) {
      return `Number of Frames (0028,0008) is ${i.numberOfFrames} but the encapsulated Pixel Data has only ${px.fragments.length} fragment(s)`;
    }
    return null;
  }
  const need = i.bitsAllocated === 1 ? Math.ceil((i.numberOfFrames * samples) / 8) : i.numberOfFrames * nativeFrameLength(i);
  if (px.length < need) {
    return (
      `Pixel Data holds ${px.length} bytes but ${i.numberOfFrames} frame(s) of ${i.rows} x ${i.columns} x ${i.samplesPerPixel} samples ` +
      `at ${i.bitsAllocated} bits need ${need}`
    );
  }
  return null;
}

/**
 * Where the data set starts after the File Meta Information (0 without one), or null when the
 * bytes are not DICOM: two files of one instance that differ only in their meta information (who
 * wrote the file, when) hold the same data set from here on.
 */
export function dataSetStart(bytes: Uint8Array): number | null {
  const encoding = encodingOf(bytes);
  return 'reason' in encoding ? null : encoding.dataSetStart;
}

export function parseDicom(bytes: Uint8Array): ParseResult {
  return parseSafely(bytes, undefined);
}

function parseSafely(bytes: Uint8Array, encoding: Encoding | { reason: string } | undefined): ParseResult {
  try {
    return parseUnsafe(bytes, encoding);
  } catch (err) {
    // Our own code is meant not to throw; this keeps the contract if a dependency does.
    return fail(`unreadable DICOM: ${err instanceof Error ? err.message : String(err)}`);
  }
}

function parseUnsafe(bytes: Uint8Array, encoding: Encoding | { reason: string } | undefined): ParseResult {
  if (bytes.length < 8) return fail('not a DICOM file');
  const l = layout(bytes, encoding ?? encodingOf(bytes));
  if ('reason' in l) return fail(l.reason);
  const { syntax } = l;
  const walked = walkElements(l.bytes, l.dataSetStart, syntax);
  if (!walked.ok) return fail(walked.reason);
  const elements = walked.elements;
  const metaValues = valueReader(l.bytes, l.meta, false, undefined);
  if (elements.size === 0) return fail('empty data set');

  const charsetValues = valueReader(l.bytes, elements, syntax.bigEndian, undefined);
  const charset = charsetValues.has(T.charset) ? charsetValues.code(T.charset) : undefined;
  const v = valueReader(l.bytes, elements, syntax.bigEndian, charset);

  const sop = uidField(v, T.sopInstance, 'SOP Instance UID');
  if ('reason' in sop) return fail(sop.reason);
  let sopClass = uidField(v, T.sopClass, 'SOP Class UID');
  if ('reason' in sopClass && metaValues.code(T.mediaSopClass) !== '') {
    // Tolerated: SOP Class only in the meta header's Media Storage SOP Class UID.
    sopClass = uidField(metaValues, T.mediaSopClass, 'SOP Class UID');
  }
  if ('reason' in sopClass) return fail(sopClass.reason);
  const study = uidField(v, T.studyUid, 'Study Instance UID');
  if ('reason' in study) return fail(study.reason);
  const series = uidField(v, T.seriesUid, 'Series Instance UID');
  if ('reason' in series) return fail(series.reason);
  const tsUid = parseUid(syntax.uid);
  if (!tsUid.ok) return fail(`invalid transfer syntax UID ${syntax.uid}`);

  const pixelElement = elements.get(T.pixelData);
  const hasPixelData = pixelElement !== undefined && pixelElement.length > 0;
  const rows = v.uint16(T.rows) ?? 0;
  const columns = v.uint16(T.columns) ?? 0;
  const bitsAllocated = v.uint16(T.bitsAllocated) ?? 0;
  const samplesPerPixel = v.uint16(T.samples) ?? 1;
  if (hasPixelData) {
    if (rows === 0 || columns === 0) return fail('pixel data without Rows/Columns');
    if (![1, 8, 16, 32, 64].includes(bitsAllocated)) return fail(`unsupported Bits Allocated ${bitsAllocated}`);
    if (samplesPerPixel !== 1 && samplesPerPixel !== 3) return fail(`unsupported Samples per Pixel ${samplesPerPixel}`);
  }
  const frames = v.number(T.frames);
  const numberOfFrames = frames !== null && Number.isInteger(frames) && frames > 0 ? frames : 1;
  const bitsStored = v.uint16(T.bitsStored) ?? bitsAllocated;
  const slope = v.number(T.slope);
  const position = fixed(v.numbers(T.position), 3);
  const orientation = fixed(v.numbers(T.orientation), 6);
  // A CR/DX radiograph often has only Imager Pixel Spacing (0018,1164), same row\column order:
  // without it its non-square pixels would be drawn square. It is spacing at the detector plane
  // (PS3.3 10.7.1.1): the source says so, and sizes from it are labelled "at detector".
  const chosen = choosePixelSpacing({
    pixelSpacing: fixed(v.numbers(T.spacing), 2),
    imagerPixelSpacing: fixed(v.numbers(T.imagerSpacing), 2),
    magnification: v.number(T.magnification),
    calibrationType: v.has(T.spacingCalibration) ? v.code(T.spacingCalibration) : null,
  });
  const spacing = chosen.spacing;

  const instance: DicomInstance = {
    patientId: v.text(T.patientId),
    patientName: v.text(T.patientName),
    patientBirthDate: v.code(T.birthDate),
    patientSex: v.code(T.sex),
    studyInstanceUid: study.uid,
    studyDate: v.code(T.studyDate),
    studyTime: v.code(T.studyTime),
    studyDescription: v.text(T.studyDescription),
    accessionNumber: v.text(T.accession),
    seriesInstanceUid: series.uid,
    seriesNumber: v.number(T.seriesNumber),
    seriesDescription: v.text(T.seriesDescription),
    modality: v.code(T.modality),
    bodyPart: v.code(T.bodyPart),
    sopInstanceUid: sop.uid,
    sopClassUid: sopClass.uid,
    transferSyntaxUid: tsUid.uid,
    instanceNumber: v.number(T.instanceNumber),
    imagePositionPatient: position as [number, number, number] | null,
    imageOrientationPatient: orientation as [number, number, number, number, number, number] | null,
    pixelSpacing: spacing,
    pixelSpacingSource: chosen.source,
    sliceThickness: v.number(T.sliceThickness),
    imageType: v.texts(T.imageType),
    rows,
    columns,
    numberOfFrames,
    samplesPerPixel,
    photometricInterpretation: v.code(T.photometric).trim() || (samplesPerPixel === 3 ? 'RGB' : 'MONOCHROME2'),
    bitsAllocated,
    bitsStored,
    highBit: v.uint16(T.highBit) ?? Math.max(bitsStored - 1, 0),
    pixelRepresentation: v.uint16(T.pixelRepresentation) === 1 ? 1 : 0,
    planarConfiguration: v.uint16(T.planar) === 1 ? 1 : 0,
    // A zero slope is never meant (it would erase the image); treat it as absent.
    rescaleSlope: slope === null || slope === 0 ? 1 : slope,
    rescaleIntercept: v.number(T.intercept) ?? 0,
    windowCenter: v.numbers(T.windowCenter),
    windowWidth: v.numbers(T.windowWidth),
    hasPixelData,
    bigEndian: syntax.bigEndian,
    deflated: syntax.deflated,
    pixelData: hasPixelData && pixelElement ? pixelLocation(pixelElement) : null,
    frames: [],
    functionalGroupsProblem: null,
  };
  const pixelReason = pixelDataReason(instance);
  if (pixelReason) return fail(pixelReason);
  if (hasPixelData) {
    // Only with Pixel Data: its length has just bounded Number of Frames, which sizes the list.
    const groups = readFunctionalGroups(l.bytes, elements, syntax.bigEndian, charset, numberOfFrames, frameValues(instance, 0));
    if (groups.frames.length > 0) {
      const first = groups.frames[0] as FrameValues;
      return {
        ok: true,
        // Pixel Measures (PS3.3 C.7.6.16.2.1) hold Pixel Spacing proper, in the patient.
        instance: {
          ...instance,
          ...first,
          pixelSpacingSource: first.pixelSpacing && !instance.pixelSpacing ? 'pixel_spacing' : instance.pixelSpacingSource,
          frames: groups.frames,
          functionalGroupsProblem: groups.problem,
        },
      };
    }
  }
  return { ok: true, instance };
}

/**
 * The file meta and top-level data set elements with a value reader in the data set's character
 * set, for the tag browser (dicom/tags.ts); sequences' items are not walked here.
 */
export function topLevelElements(
  bytes: Uint8Array,
): { bytes: Uint8Array; meta: Elements; elements: Elements; bigEndian: boolean; values: ValueReader; metaValues: ValueReader } | { reason: string } {
  const l = layout(bytes);
  if ('reason' in l) return l;
  const walked = walkElements(l.bytes, l.dataSetStart, l.syntax);
  if (!walked.ok) return { reason: walked.reason };
  const plain = valueReader(l.bytes, walked.elements, l.syntax.bigEndian, undefined);
  const charset = plain.has(T.charset) ? plain.code(T.charset) : undefined;
  return {
    bytes: l.bytes,
    meta: l.meta,
    elements: walked.elements,
    bigEndian: l.syntax.bigEndian,
    values: valueReader(l.bytes, walked.elements, l.syntax.bigEndian, charset),
    metaValues: valueReader(l.bytes, l.meta, false, undefined),
  };
}
