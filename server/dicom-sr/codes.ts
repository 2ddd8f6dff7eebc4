/**
 * The coded concepts mia's SR documents use: DICOM's own (DCM, PS3.16 Annex D), SNOMED CT (SCT),
 * LOINC (LN), UCUM and RFC 5646, checked against pydicom's copy of PS3.16 (pydicom.sr.codedict),
 * and mia's private scheme 99MIA (PS3.16 8.2: designators beginning with 99 are private) for what
 * no standard concept names: the reader's verdict on a finding, and a label whose glossary entry
 * has no code.
 */
import type { Code } from '#server/dicom-sr/content-items.ts';

const dcm = (value: string, meaning: string): Code => ({ value, scheme: 'DCM', meaning });

export const MIA_SCHEME = '99MIA';
const mia = (value: string, meaning: string): Code => ({ value, scheme: MIA_SCHEME, meaning });

export const CODES = {
  imagingMeasurementReport: dcm('126000', 'Imaging Measurement Report'),
  languageOfContent: dcm('121049', 'Language of Content Item and Descendants'),
  englishUs: { value: 'en-US', scheme: 'RFC5646', meaning: 'English (United States)' },
  observerType: dcm('121005', 'Observer Type'),
  device: dcm('121007', 'Device'),
  person: dcm('121006', 'Person'),
  deviceObserverUid: dcm('121012', 'Device Observer UID'),
  deviceObserverName: dcm('121013', 'Device Observer Name'),
  deviceObserverManufacturer: dcm('121014', 'Device Observer Manufacturer'),
  deviceObserverModelName: dcm('121015', 'Device Observer Model Name'),
  personObserverName: dcm('121008', 'Person Observer Name'),
  personObserverLoginName: dcm('128774', "Person Observer's Login Name"),
  procedureReported: dcm('121058', 'Procedure reported'),
  imageLibrary: dcm('111028', 'Image Library'),
  imageLibraryGroup: dcm('126200', 'Image Library Group'),
  source: { value: '260753009', scheme: 'SCT', meaning: 'Source' },
  imagingMeasurements: dcm('126010', 'Imaging Measurements'),
  measurementGroup: dcm('125007', 'Measurement Group'),
  trackingIdentifier: dcm('112039', 'Tracking Identifier'),
  trackingUid: dcm('112040', 'Tracking Unique Identifier'),
  finding: dcm('121071', 'Finding'),
  imageRegion: dcm('111030', 'Image Region'),
  algorithmName: dcm('111001', 'Algorithm Name'),
  algorithmVersion: dcm('111003', 'Algorithm Version'),
  algorithmParameters: dcm('111002', 'Algorithm Parameters'),
  certaintyOfFinding: dcm('111012', 'Certainty of Finding'),
  noUnits: { value: '1', scheme: 'UCUM', meaning: 'no units' },
  comment: dcm('121106', 'Comment'),
  // Diagnostic imaging report (TID 2000): title (CID 7000), headings (CID 7001), elements (CID 7002).
  diagnosticImagingReport: { value: '18748-4', scheme: 'LN', meaning: 'Diagnostic Imaging Report' },
  findingsHeading: { value: '59776-5', scheme: 'LN', meaning: 'Findings' },
  impressionsHeading: { value: '19005-8', scheme: 'LN', meaning: 'Impressions' },
  recommendationsHeading: { value: '18783-1', scheme: 'LN', meaning: 'Recommendations' },
  addendumHeading: { value: '55107-7', scheme: 'LN', meaning: 'Addendum' },
  impression: dcm('121073', 'Impression'),
  recommendation: dcm('121075', 'Recommendation'),
  // mia's own: the reader's verdict on a finding, and who made it (a reader-drawn finding).
  readerReview: mia('READER_REVIEW', 'Reader review of finding'),
  accepted: mia('ACCEPTED', 'Accepted by reader'),
  rejected: mia('REJECTED', 'Rejected by reader'),
} as const satisfies Record<string, Code>;

/** CID 100 (Quantitative Diagnostic Imaging Procedures) for the scan's modality. */
export function procedureCode(modality: string): Code {
  if (modality === 'CT') return { value: '25045-6', scheme: 'LN', meaning: 'CT unspecified body region' };
  if (modality === 'MR') return { value: '25056-3', scheme: 'LN', meaning: 'MRI unspecified body region' };
  return { value: '363679005', scheme: 'SCT', meaning: 'Imaging procedure' };
}

/** Coding Scheme Identification (0008,0110) entries: the schemes' names and who keeps them. */
export const SCHEME_NAMES: Readonly<Record<string, { name: string; organization: string }>> = {
  DCM: { name: 'DICOM Controlled Terminology', organization: 'NEMA' },
  SCT: { name: 'SNOMED CT', organization: 'SNOMED International' },
  LN: { name: 'Logical Observation Identifiers Names and Codes', organization: 'Regenstrief Institute' },
  UCUM: { name: 'Unified Code for Units of Measure', organization: 'Regenstrief Institute' },
  RFC5646: { name: 'Tags for Identifying Languages', organization: 'IETF' },
  RADLEX: { name: 'RadLex', organization: 'RSNA' },
  [MIA_SCHEME]: { name: 'mia local codes: reader verdicts and labels without a standard code', organization: 'mia' },
};

/** The glossary's terminology names (manifest.ts: SNOMED CT, RadLex) as DICOM scheme designators. */
export function schemeDesignator(system: string): string | null {
  if (system === 'SNOMED CT') return 'SCT';
  if (system === 'RadLex') return 'RADLEX';
  return null;
}
