/**
 * An SR document's data set around its content tree (PS3.3 A.35): the Patient and General Study
 * modules copied from the images it is about, a new SR Document Series in their study, General
 * Equipment (mia), SR Document General (completion, verification, the evidence it rests on) and
 * SOP Common. Every value is given by the caller; nothing here reads a clock.
 */
import { sequence, tagOf, text, type DataSet, type Element } from '#server/dicom/write/data-set-writer.ts';
import { writePart10 } from '#server/dicom/write/part10-file.ts';
import { codesIn, dicomDateAndTime, dicomDateTime, encodeContentItem, sopReferenceItem, type Code, type ContentItem } from '#server/dicom-sr/content-items.ts';
import { SCHEME_NAMES } from '#server/dicom-sr/codes.ts';

export const SOP_CLASS = {
  basicTextSr: '1.2.840.10008.5.1.4.1.1.88.11',
  comprehensiveSr: '1.2.840.10008.5.1.4.1.1.88.33',
} as const;

/** Patient and study attributes as the referenced images hold them ('' where they have none). */
export type PatientStudy = {
  patientName: string;
  patientId: string;
  issuerOfPatientId: string;
  birthDate: string;
  sex: string;
  studyUid: string;
  studyDate: string;
  studyTime: string;
  referringPhysician: string;
  studyId: string;
  accessionNumber: string;
  studyDescription: string;
  /** Where the images were made: the verifying observers' organization as far as mia knows. */
  institutionName: string;
};

export type EvidenceInstance = { studyUid: string; seriesUid: string; sopClassUid: string; sopInstanceUid: string };

export type Verification = { flag: 'UNVERIFIED' } | { flag: 'VERIFIED'; observers: ReadonlyArray<{ name: string; at: string }> };

export type SrDocument = {
  sopClassUid: string;
  sopInstanceUid: string;
  seriesUid: string;
  seriesNumber: number;
  seriesDescription: string;
  instanceNumber: number;
  patientStudy: PatientStudy;
  /** When the content was observed (Content Date/Time) and when this instance's content came to be. */
  contentAt: string;
  createdAt: string;
  completion: 'COMPLETE' | 'PARTIAL';
  verification: Verification;
  /** Instances the document is about (Current Requested Procedure Evidence). */
  evidence: readonly EvidenceInstance[];
  /** Other objects it refers to, such as another SR (Pertinent Other Evidence). */
  otherEvidence: readonly EvidenceInstance[];
  root: ContentItem;
};

const tag = tagOf;

/** PS3.3 C.17.2.3: evidence grouped by study, then series, each level sorted for stable bytes. */
function hierarchicalReferences(instances: readonly EvidenceInstance[]): DataSet[] {
  const byStudy = new Map<string, Map<string, Map<string, EvidenceInstance>>>();
  for (const i of instances) {
    const series = byStudy.get(i.studyUid) ?? new Map<string, Map<string, EvidenceInstance>>();
    const sops = series.get(i.seriesUid) ?? new Map<string, EvidenceInstance>();
    sops.set(i.sopInstanceUid, i);
    series.set(i.seriesUid, sops);
    byStudy.set(i.studyUid, series);
  }
  const sorted = <V>(m: Map<string, V>): Array<[string, V]> => [...m.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return sorted(byStudy).map(([studyUid, series]) => [
    text(tag(0x0020, 0x000d), 'UI', studyUid),
    sequence(
      tag(0x0008, 0x1115),
      sorted(series).map(([seriesUid, sops]) => [
        text(tag(0x0020, 0x000e), 'UI', seriesUid),
        sequence(tag(0x0008, 0x1199), sorted(sops).map(([, sop]) => sopReferenceItem(sop))),
      ]),
    ),
  ]);
}

function verificationElements(v: Verification, organization: string): Element[] {
  if (v.flag === 'UNVERIFIED') return [text(tag(0x0040, 0xa493), 'CS', 'UNVERIFIED')];
  return [
    text(tag(0x0040, 0xa493), 'CS', 'VERIFIED'),
    sequence(
      tag(0x0040, 0xa073),
      v.observers.map((o) => [
        text(tag(0x0040, 0xa027), 'LO', organization),
        text(tag(0x0040, 0xa030), 'DT', dicomDateTime(o.at)),
        text(tag(0x0040, 0xa075), 'PN', o.name),
        sequence(tag(0x0040, 0xa088), []),
      ]),
    ),
  ];
}

function codingSchemes(root: ContentItem): DataSet[] {
  const schemes = [...new Set(codesIn(root).map((c: Code) => c.scheme))].sort();
  return schemes.flatMap((scheme) => {
    const known = SCHEME_NAMES[scheme];
    if (!known) return [];
    return [[text(tag(0x0008, 0x0102), 'SH', scheme), text(tag(0x0008, 0x0115), 'ST', known.name), text(tag(0x0008, 0x0116), 'ST', known.organization)]];
  });
}

export function srDataSet(doc: SrDocument): DataSet {
  const p = doc.patientStudy;
  const content = dicomDateAndTime(doc.contentAt);
  const created = dicomDateAndTime(doc.createdAt);
  return [
    // SOP Common
    text(tag(0x0008, 0x0016), 'UI', doc.sopClassUid),
    text(tag(0x0008, 0x0018), 'UI', doc.sopInstanceUid),
    text(tag(0x0008, 0x0012), 'DA', created.date),
    text(tag(0x0008, 0x0013), 'TM', created.time),
    text(tag(0x0008, 0x0201), 'SH', '+0000'),
    sequence(tag(0x0008, 0x0110), codingSchemes(doc.root)),
    // Patient
    text(tag(0x0010, 0x0010), 'PN', p.patientName),
    text(tag(0x0010, 0x0020), 'LO', p.patientId),
    ...(p.issuerOfPatientId === '' ? [] : [text(tag(0x0010, 0x0021), 'LO', p.issuerOfPatientId)]),
    text(tag(0x0010, 0x0030), 'DA', p.birthDate),
    text(tag(0x0010, 0x0040), 'CS', p.sex),
    // General Study
    text(tag(0x0020, 0x000d), 'UI', p.studyUid),
    text(tag(0x0008, 0x0020), 'DA', p.studyDate),
    text(tag(0x0008, 0x0030), 'TM', p.studyTime),
    text(tag(0x0008, 0x0090), 'PN', p.referringPhysician),
    text(tag(0x0020, 0x0010), 'SH', p.studyId),
    text(tag(0x0008, 0x0050), 'SH', p.accessionNumber),
    ...(p.studyDescription === '' ? [] : [text(tag(0x0008, 0x1030), 'LO', p.studyDescription)]),
    // SR Document Series
    text(tag(0x0008, 0x0060), 'CS', 'SR'),
    text(tag(0x0020, 0x000e), 'UI', doc.seriesUid),
    text(tag(0x0020, 0x0011), 'IS', String(doc.seriesNumber)),
    text(tag(0x0008, 0x103e), 'LO', doc.seriesDescription),
    sequence(tag(0x0008, 0x1111), []),
    // General Equipment
    text(tag(0x0008, 0x0070), 'LO', 'mia'),
    text(tag(0x0008, 0x1090), 'LO', 'mia'),
    // SR Document General
    text(tag(0x0020, 0x0013), 'IS', String(doc.instanceNumber)),
    text(tag(0x0040, 0xa491), 'CS', doc.completion),
    // Verifying Organization is Type 1: the images' institution, else said to be unknown.
    ...verificationElements(doc.verification, p.institutionName === '' ? 'unknown' : p.institutionName),
    text(tag(0x0008, 0x0023), 'DA', content.date),
    text(tag(0x0008, 0x0033), 'TM', content.time),
    sequence(tag(0x0040, 0xa372), []),
    ...(doc.evidence.length === 0 ? [] : [sequence(tag(0x0040, 0xa375), hierarchicalReferences(doc.evidence))]),
    ...(doc.otherEvidence.length === 0 ? [] : [sequence(tag(0x0040, 0xa385), hierarchicalReferences(doc.otherEvidence))]),
    // SR Document Content: the root item's elements sit in the data set itself.
    ...encodeContentItem(doc.root, null),
  ];
}

/** The document as a Part 10 file. */
export function writeSrFile(doc: SrDocument): Uint8Array {
  return writePart10(srDataSet(doc), { sopClassUid: doc.sopClassUid, sopInstanceUid: doc.sopInstanceUid });
}
