/**
 * An analysis as a TID 1500 Measurement Report (PS3.16 A.35.1) in a Comprehensive SR, chosen for
 * its SCOORD items and coded values (Basic and Enhanced SR have no SCOORD selected from an image
 * with a code beside it in the same group; Comprehensive 3D SR is for 3D coordinates we do not
 * have). The model is the device observer (TID 1004: its UID derived from name, version and file
 * digest) and, in each of its findings' groups, the algorithm (TID 4019: name, version, and its
 * file's SHA-256 and the label's threshold as parameters). Each finding is one TID 1410 Planar ROI
 * group: tracking identifier and UID, the label's code as Finding, the box as a closed POLYLINE
 * selected from its image (and frame), the model's confidence, and the reader's verdict. A
 * finding about a whole image (a slice classifier's) is a TID 1501 group naming the image instead.
 *
 * The confidence is a NUM (111012, DCM, "Certainty of Finding"), the concept CAD reports use for
 * a detector's certainty, with the model's own 0-1 value and UCUM "1" (no units): a number a
 * receiving system can threshold and sort, kept exact in Floating Point Value. A qualitative
 * evaluation would have lost the number. Findings a reader drew carry no certainty (mia stores 1
 * for them only because the column needs a value); their group names the reader as observer.
 */
import type { FindingLocalization } from '#common/vocabulary.ts';
import { CODES, procedureCode } from '#server/dicom-sr/codes.ts';
import { child, type Child, type Code, type ContentItem, type SopReference } from '#server/dicom-sr/content-items.ts';
import { hashedUid } from '#server/dicom/write/hashed-uid.ts';

export type Person = { name: string; login: string };

export type ReportedFinding = {
  id: string;
  label: string;
  code: Code;
  source: 'model' | 'reader';
  confidence: number;
  /** Top-left corner and size in image pixels (origin at the top-left pixel's outer corner). */
  box: { x: number; y: number; width: number; height: number };
  /** 'image': the finding is about the whole image (a slice classifier), the box is no place. */
  localization: FindingLocalization;
  image: SopReference;
  /** Who drew it, for a reader's finding. */
  author: Person | null;
  review: { verdict: 'accepted' | 'rejected'; by: Person | null; at: string | null; reason: string | null } | null;
};

export type ReportedAnalysis = {
  model: { id: string; name: string; version: string; sha256: string };
  thresholds: Readonly<Record<string, number>>;
  modality: string;
  findings: readonly ReportedFinding[];
  /** The instances the findings are on, for the image library (no frame numbers). */
  images: readonly SopReference[];
};

const text = (name: Code, value: string, children?: Child[]): ContentItem => ({ type: 'TEXT', name, text: value, ...(children ? { children } : {}) });

/** TID 1002 with a person observer: the observer type, name and login (TID 1003). */
export function personObserver(person: Person): Child[] {
  return [
    child('HAS OBS CONTEXT', { type: 'CODE', name: CODES.observerType, code: CODES.person }),
    child('HAS OBS CONTEXT', { type: 'PNAME', name: CODES.personObserverName, person: person.name }),
    child('HAS OBS CONTEXT', text(CODES.personObserverLoginName, person.login)),
  ];
}

export function language(): Child {
  return child('HAS CONCEPT MOD', { type: 'CODE', name: CODES.languageOfContent, code: CODES.englishUs });
}

/** A closed polyline around the box, corners clockwise from the top-left (PS3.3 C.18.6.1.1). */
function boxOutline(b: ReportedFinding['box']): number[] {
  const right = b.x + b.width;
  const bottom = b.y + b.height;
  return [b.x, b.y, right, b.y, right, bottom, b.x, bottom, b.x, b.y];
}

function reviewItem(review: NonNullable<ReportedFinding['review']>): Child {
  const children: Child[] = [
    ...(review.by ? personObserver(review.by) : []),
    ...(review.reason ? [child('HAS CONCEPT MOD', text(CODES.comment, review.reason))] : []),
  ];
  return child('CONTAINS', {
    type: 'CODE',
    name: CODES.readerReview,
    code: review.verdict === 'accepted' ? CODES.accepted : CODES.rejected,
    ...(review.at ? { observedAt: review.at } : {}),
    ...(children.length > 0 ? { children } : {}),
  });
}

function group(analysis: ReportedAnalysis, f: ReportedFinding): Child {
  const { model } = analysis;
  const threshold = analysis.thresholds[f.label];
  const imageLevel = f.localization === 'image';
  const children: Child[] = [
    child('HAS OBS CONTEXT', text(CODES.trackingIdentifier, `finding ${f.id}`)),
    child('HAS OBS CONTEXT', { type: 'UIDREF', name: CODES.trackingUid, uid: hashedUid('mia finding', f.id) }),
    ...(f.source === 'reader' && f.author ? personObserver(f.author) : []),
    child('CONTAINS', { type: 'CODE', name: CODES.finding, code: f.code }),
    ...(f.source === 'model'
      ? [
          child('HAS CONCEPT MOD', text(CODES.algorithmName, model.name)),
          child('HAS CONCEPT MOD', text(CODES.algorithmVersion, model.version)),
          child('HAS CONCEPT MOD', text(CODES.algorithmParameters, `model_sha256=${model.sha256}`)),
          ...(threshold === undefined ? [] : [child('HAS CONCEPT MOD', text(CODES.algorithmParameters, `threshold=${threshold}`))]),
        ]
      : []),
    // An image-level finding has no region to outline: its group (TID 1501, Measurement and
    // Qualitative Evaluation Group) names the image, so no reader takes the frame for a box.
    imageLevel
      ? child('CONTAINS', { type: 'IMAGE', name: CODES.source, ref: f.image })
      : child('CONTAINS', {
          type: 'SCOORD',
          name: CODES.imageRegion,
          graphicType: 'POLYLINE',
          points: boxOutline(f.box),
          children: [child('SELECTED FROM', { type: 'IMAGE', name: CODES.source, ref: f.image })],
        }),
    ...(f.source === 'model' ? [child('CONTAINS', { type: 'NUM', name: CODES.certaintyOfFinding, value: f.confidence, unit: CODES.noUnits })] : []),
    ...(f.review ? [reviewItem(f.review)] : []),
  ];
  return child('CONTAINS', { type: 'CONTAINER', name: CODES.measurementGroup, template: imageLevel ? '1501' : '1410', children });
}

/** The content tree of the Measurement Report. */
export function measurementReportTree(analysis: ReportedAnalysis): ContentItem {
  const { model } = analysis;
  const library: ContentItem = {
    type: 'CONTAINER',
    name: CODES.imageLibrary,
    children: [
      child('CONTAINS', {
        type: 'CONTAINER',
        name: CODES.imageLibraryGroup,
        children: analysis.images.map((ref) => child('CONTAINS', { type: 'IMAGE', name: CODES.source, ref })),
      }),
    ],
  };
  return {
    type: 'CONTAINER',
    name: CODES.imagingMeasurementReport,
    template: '1500',
    children: [
      language(),
      child('HAS OBS CONTEXT', { type: 'CODE', name: CODES.observerType, code: CODES.device }),
      child('HAS OBS CONTEXT', { type: 'UIDREF', name: CODES.deviceObserverUid, uid: hashedUid('mia model', model.id, model.version, model.sha256) }),
      child('HAS OBS CONTEXT', text(CODES.deviceObserverName, model.name)),
      child('HAS OBS CONTEXT', text(CODES.deviceObserverManufacturer, 'mia')),
      child('HAS OBS CONTEXT', text(CODES.deviceObserverModelName, `${model.id} ${model.version}`)),
      child('HAS CONCEPT MOD', { type: 'CODE', name: CODES.procedureReported, code: procedureCode(analysis.modality) }),
      ...(analysis.images.length > 0 ? [child('CONTAINS', library)] : []),
      ...(analysis.findings.length > 0
        ? [child('CONTAINS', { type: 'CONTAINER', name: CODES.imagingMeasurements, children: analysis.findings.map((f) => group(analysis, f)) })]
        : []),
    ],
  };
}
