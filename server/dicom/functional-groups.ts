/**
 * Multi-frame Functional Groups (PS3.3 C.7.6.16): in Enhanced CT/MR (and other enhanced IODs)
 * the rescale, pixel spacing, plane position/orientation and window values are not top-level
 * attributes but live in the Shared Functional Groups Sequence (5200,9229), one item for all
 * frames, and the Per-frame Functional Groups Sequence (5200,9230), one item per frame. Each
 * group is a macro: a sequence of one item holding the classic attributes.
 *
 * A frame's value is its per-frame macro's, else the shared macro's, else the top-level
 * attribute's (some writers keep those too). Loops run over the items the file's bytes hold,
 * never over a count the file states.
 */
import type { Element, Elements } from '#server/dicom/data-set.ts';
import { valueReader, type ValueReader } from '#server/dicom/values.ts';

export type Vec3 = [number, number, number];
export type Orientation = [number, number, number, number, number, number];

/** What one frame needs to be shown, measured and analysed in its own units and place. */
export type FrameValues = {
  rescaleSlope: number;
  rescaleIntercept: number;
  imagePositionPatient: Vec3 | null;
  imageOrientationPatient: Orientation | null;
  /** Row spacing then column spacing, in mm (PS3.3 10.7.1.3). */
  pixelSpacing: [number, number] | null;
  sliceThickness: number | null;
  windowCenter: number[];
  windowWidth: number[];
};

export type FunctionalGroups = {
  /** One entry per frame; empty when the file has no functional groups (classic images). */
  frames: FrameValues[];
  /** Why the per-frame values could not be read; frames then carry shared/top-level values only. */
  problem: string | null;
};

const TAG = {
  shared: 'x52009229',
  perFrame: 'x52009230',
  pixelMeasures: 'x00289110',
  planePosition: 'x00209113',
  planeOrientation: 'x00209116',
  pixelValueTransformation: 'x00289145',
  frameVoiLut: 'x00289132',
  spacing: 'x00280030',
  sliceThickness: 'x00180050',
  position: 'x00200032',
  orientation: 'x00200037',
  windowCenter: 'x00281050',
  windowWidth: 'x00281051',
  intercept: 'x00281052',
  slope: 'x00281053',
} as const;

/** The values one group states; absent ones fall through to the next source. */
type Stated = { [K in keyof FrameValues]?: FrameValues[K] };

function itemElements(item: Element): Elements | null {
  const ds = item.dataSet;
  return ds ? new Map(Object.entries(ds.elements)) : null;
}

/** The first item of a macro's sequence (each functional group macro holds exactly one). */
function macro(elements: Elements, tag: string): Elements | null {
  const first = elements.get(tag)?.items?.[0];
  return first ? itemElements(first) : null;
}

function fixed<T extends number[]>(values: number[], n: T['length']): T | null {
  return values.length === n ? (values as T) : null;
}

/** The values one functional groups item (shared or per-frame) states; absent ones stay absent. */
function groupValues(group: Elements, read: (elements: Elements) => ValueReader): Stated {
  const out: Stated = {};
  const measures = macro(group, TAG.pixelMeasures);
  if (measures) {
    const v = read(measures);
    const spacing = fixed<[number, number]>(v.numbers(TAG.spacing), 2);
    if (spacing) out.pixelSpacing = spacing;
    const thickness = v.number(TAG.sliceThickness);
    if (thickness !== null) out.sliceThickness = thickness;
  }
  const position = macro(group, TAG.planePosition);
  if (position) {
    const p = fixed<Vec3>(read(position).numbers(TAG.position), 3);
    if (p) out.imagePositionPatient = p;
  }
  const orientation = macro(group, TAG.planeOrientation);
  if (orientation) {
    const o = fixed<Orientation>(read(orientation).numbers(TAG.orientation), 6);
    if (o) out.imageOrientationPatient = o;
  }
  const transformation = macro(group, TAG.pixelValueTransformation);
  if (transformation) {
    const v = read(transformation);
    const slope = v.number(TAG.slope);
    // A zero slope is never meant (it would erase the image); treat it as absent, as parse.ts does.
    if (slope !== null && slope !== 0) out.rescaleSlope = slope;
    const intercept = v.number(TAG.intercept);
    if (intercept !== null) out.rescaleIntercept = intercept;
  }
  const voi = macro(group, TAG.frameVoiLut);
  if (voi) {
    const v = read(voi);
    const centers = v.numbers(TAG.windowCenter);
    const widths = v.numbers(TAG.windowWidth);
    if (centers.length > 0 && widths.length > 0) {
      out.windowCenter = centers;
      out.windowWidth = widths;
    }
  }
  return out;
}

const merge = (base: FrameValues, over: Stated): FrameValues => ({
  rescaleSlope: over.rescaleSlope ?? base.rescaleSlope,
  rescaleIntercept: over.rescaleIntercept ?? base.rescaleIntercept,
  imagePositionPatient: over.imagePositionPatient ?? base.imagePositionPatient,
  imageOrientationPatient: over.imageOrientationPatient ?? base.imageOrientationPatient,
  pixelSpacing: over.pixelSpacing ?? base.pixelSpacing,
  sliceThickness: over.sliceThickness ?? base.sliceThickness,
  windowCenter: over.windowCenter ?? base.windowCenter,
  windowWidth: over.windowWidth ?? base.windowWidth,
});

/**
 * Reads the functional groups of a data set whose top-level values are `topLevel`.
 * `numberOfFrames` has been checked against the Pixel Data already (parse.ts).
 */
export function readFunctionalGroups(
  bytes: Uint8Array,
  elements: Elements,
  bigEndian: boolean,
  charset: string | undefined,
  numberOfFrames: number,
  topLevel: FrameValues,
): FunctionalGroups {
  const sharedSeq = elements.get(TAG.shared);
  const perFrameSeq = elements.get(TAG.perFrame);
  if (!sharedSeq && !perFrameSeq) return { frames: [], problem: null };
  const read = (e: Elements): ValueReader => valueReader(bytes, e, bigEndian, charset);

  const sharedGroup = sharedSeq?.items?.[0];
  const sharedElements = sharedGroup ? itemElements(sharedGroup) : null;
  const shared = merge(topLevel, sharedElements ? groupValues(sharedElements, read) : {});

  const items = perFrameSeq?.items ?? [];
  let problem: string | null = null;
  if (perFrameSeq && items.length !== numberOfFrames) {
    // PS3.3 C.7.6.16.1: exactly one item per frame. Which item belongs to which frame is then
    // unknown, so none is used; the reason lets analysis refuse rather than guess.
    problem = `Per-frame Functional Groups Sequence (5200,9230) has ${items.length} item(s) for ${numberOfFrames} frame(s)`;
  } else if (!perFrameSeq && numberOfFrames > 1) {
    // Type 1 in enhanced IODs; without it every frame has the shared values but no position of its own.
    problem = 'Per-frame Functional Groups Sequence (5200,9230) is missing';
  }
  const usable = problem === null ? items : [];
  const frames: FrameValues[] = [];
  // Bounded by numberOfFrames, which the Pixel Data's length backs (parse.ts pixelDataReason).
  for (let f = 0; f < numberOfFrames; f++) {
    const item = usable[f];
    const own = item ? itemElements(item) : null;
    frames.push(own ? merge(shared, groupValues(own, read)) : shared);
  }
  return { frames, problem };
}
