/**
 * What an SR copies from the images it is about (server/dicom-sr/patient-study.ts): values as the
 * file holds them in its own character set; a value from a lax writer that does not fit its VR
 * left empty and named in the notes, never quoted; the archive index when no file can be read.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { copiedAttributes } from '#server/dicom-sr/patient-study.ts';
import type { ScanStudyRow } from '#server/store/structured-report-sources.ts';
import { CT_SMALL } from '../helpers/image-fixture.ts';

const dir = mkdtempSync(join(tmpdir(), 'mia-sr-copy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const INDEX: ScanStudyRow = {
  scan_ref: 1, scan_id: '1.2.3', modality: 'CT', study_uid: '1.2.3.4', study_date: '20260301', study_time: '080000',
  study_description: 'Head', accession_number: 'ACC1', patient_id: 'PAT-1', patient_name: 'Doe^Jane', birth_date: '19700101', sex: 'F',
};

/** CT_small with some attributes rewritten by pydicom, as a lax writer might leave them. */
function variant(name: string, changes: Record<string, string>): string {
  const script = `
import sys, json, pydicom
ds = pydicom.dcmread(sys.argv[1])
ds.SpecificCharacterSet = 'ISO_IR 100'
for k, v in json.loads(sys.argv[3]).items(): setattr(ds, k, v)
ds.save_as(sys.argv[2])`;
  execFileSync('/usr/bin/python3', ['-c', script, CT_SMALL, join(dir, name), JSON.stringify(changes)]);
  return name;
}

describe('patient and study attributes for an SR', () => {
  it('are the file\'s, decoded from its character set, with the index\'s study UID', async () => {
    const file = variant('latin1.dcm', { PatientName: 'MÜLLER^HANS', ReferringPhysicianName: 'Ärzt^Eva', StudyID: 'S-7', InstitutionName: 'Hôpital' });
    const { patientStudy, notes } = await copiedAttributes(dir, INDEX, file);
    expect(notes).toEqual([]);
    expect(patientStudy).toMatchObject({ patientName: 'MÜLLER^HANS', referringPhysician: 'Ärzt^Eva', studyId: 'S-7', institutionName: 'Hôpital', patientId: '1CT1', studyUid: '1.2.3.4' });
  });

  it('leave a value that does not fit its VR empty, naming the attribute but not the value', async () => {
    const file = variant('lax.dcm', { PatientBirthDate: '1970-01-01', PatientID: 'X'.repeat(70) });
    const { patientStudy, notes } = await copiedAttributes(dir, INDEX, file);
    expect(patientStudy.birthDate).toBe('');
    expect(patientStudy.patientId).toBe('');
    expect(notes).toEqual([expect.stringMatching(/^Patient ID left empty/), expect.stringMatching(/^Patient's Birth Date left empty/)]);
    expect(notes.join(' ')).not.toContain('XXXX');
    expect(notes.join(' ')).not.toContain('1970');
  });

  it('come from the archive index when the file is gone', async () => {
    const { patientStudy, notes } = await copiedAttributes(dir, INDEX, 'missing.dcm');
    expect(patientStudy).toMatchObject({ patientName: 'Doe^Jane', patientId: 'PAT-1', birthDate: '19700101', accessionNumber: 'ACC1', studyUid: '1.2.3.4' });
    expect(notes).toEqual([expect.stringMatching(/archive index/)]);
  });
});
