/**
 * The Patient and General Study attributes an SR copies from the images it is about (PS3.3
 * C.7.1.1, C.7.2.1), read from one stored file of the series in its own character set; where the
 * file cannot be read, from the archive index (which keeps the first-seen values of the same
 * attributes). A value that does not fit its VR (a file from a lax writer) is left empty, these
 * attributes being Type 2, and named in the notes, without its content (it may be PHI).
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { topLevelElements } from '#server/dicom/parse.ts';
import { textProblem, type TextVr } from '#server/dicom/write/data-set-writer.ts';
import type { PatientStudy } from '#server/dicom-sr/sr-document.ts';
import type { ScanStudyRow } from '#server/store/structured-report-sources.ts';

type Field = Exclude<keyof PatientStudy, 'studyUid'>;

const FROM_FILE: ReadonlyArray<{ field: Field; tag: string; vr: TextVr; name: string }> = [
  { field: 'patientName', tag: 'x00100010', vr: 'PN', name: "Patient's Name" },
  { field: 'patientId', tag: 'x00100020', vr: 'LO', name: 'Patient ID' },
  { field: 'issuerOfPatientId', tag: 'x00100021', vr: 'LO', name: 'Issuer of Patient ID' },
  { field: 'birthDate', tag: 'x00100030', vr: 'DA', name: "Patient's Birth Date" },
  { field: 'sex', tag: 'x00100040', vr: 'CS', name: "Patient's Sex" },
  { field: 'studyDate', tag: 'x00080020', vr: 'DA', name: 'Study Date' },
  { field: 'studyTime', tag: 'x00080030', vr: 'TM', name: 'Study Time' },
  { field: 'referringPhysician', tag: 'x00080090', vr: 'PN', name: "Referring Physician's Name" },
  { field: 'studyId', tag: 'x00200010', vr: 'SH', name: 'Study ID' },
  { field: 'accessionNumber', tag: 'x00080050', vr: 'SH', name: 'Accession Number' },
  { field: 'studyDescription', tag: 'x00081030', vr: 'LO', name: 'Study Description' },
  { field: 'institutionName', tag: 'x00080080', vr: 'LO', name: 'Institution Name' },
];

const VR_OF: Readonly<Record<Field, TextVr>> = Object.fromEntries(FROM_FILE.map((f) => [f.field, f.vr])) as Record<Field, TextVr>;

export type CopiedAttributes = { patientStudy: PatientStudy; notes: string[] };

function fromIndex(row: ScanStudyRow): Omit<PatientStudy, 'studyUid'> {
  return {
    patientName: row.patient_name ?? '',
    patientId: row.patient_id,
    issuerOfPatientId: '',
    birthDate: row.birth_date ?? '',
    sex: row.sex ?? '',
    studyDate: row.study_date ?? '',
    studyTime: row.study_time ?? '',
    referringPhysician: '',
    studyId: '',
    accessionNumber: row.accession_number ?? '',
    studyDescription: row.study_description ?? '',
    institutionName: '',
  };
}

async function fromFile(path: string): Promise<Omit<PatientStudy, 'studyUid'> | null> {
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(await readFile(path));
  } catch {
    return null;
  }
  const read = topLevelElements(bytes);
  if ('reason' in read) return null;
  const out = {} as Record<Field, string>;
  // DA, TM and CS are ASCII: read without the character set, and with their padding trimmed.
  for (const f of FROM_FILE) out[f.field] = (f.vr === 'PN' || f.vr === 'LO' || f.vr === 'SH' ? read.values.text(f.tag) : read.values.code(f.tag)).trim();
  return out;
}

/**
 * `samplePath` is a stored file of the scan (relative to the data folder), or null when none is
 * stored here. The study's UID is always the index's: it is what the SR's series joins.
 */
export async function copiedAttributes(dataDir: string, row: ScanStudyRow, samplePath: string | null): Promise<CopiedAttributes> {
  const notes: string[] = [];
  const read = samplePath === null ? null : await fromFile(join(dataDir, samplePath));
  if (read === null) notes.push('patient and study attributes taken from the archive index (no readable stored file)');
  const values = read ?? fromIndex(row);
  for (const f of FROM_FILE) {
    const problem = textProblem(VR_OF[f.field], values[f.field]);
    if (problem) {
      notes.push(`${f.name} left empty: the source value does not fit its VR (${problem})`);
      values[f.field] = '';
    }
  }
  return { patientStudy: { ...values, studyUid: row.study_uid }, notes };
}
