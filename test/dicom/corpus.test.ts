/**
 * Every file of pydicom's test corpus is either parsed with the same identity and geometry as
 * pydicom reads, or rejected with the reason listed here, so a regression either way shows.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseDicom } from '#server/dicom/parse.ts';
import { CORPUS, corpusFiles, requirePydicom, runPydicom, type PydicomMeta } from './helpers/reference.ts';

const NOT_DICOM = 'not a DICOM file';
const DICOMDIR = 'a DICOMDIR media directory, not an instance';

/** Files we refuse, with the reason we give. */
const EXPECTED_REJECTIONS: Readonly<Record<string, string>> = {
  'MR_truncated.dcm': 'truncated at byte 9630: element (7FE0,0010) at offset 1488 declares 8192 bytes',
  'rtplan_truncated.dcm': 'truncated at byte 2129: element (300A,00B0) at offset 1410 runs past the end',
  'README.txt': NOT_DICOM,
  'rtplan.dump': NOT_DICOM,
  'rtstruct.dump': NOT_DICOM,
  'test1.json': NOT_DICOM,
  'test_PN.json': NOT_DICOM,
  'zipMR.gz': NOT_DICOM,
  // Starts with a stray byte before (0008,0005); pydicom cannot read it either.
  'no_meta.dcm': NOT_DICOM,
  'dicomdirtests/README.txt': NOT_DICOM,
  'dicomdirtests/TINY_ALPHA/README': NOT_DICOM,
  'dicomdirtests/DICOMDIR': DICOMDIR,
  'dicomdirtests/DICOMDIR-bigEnd': DICOMDIR,
  'dicomdirtests/DICOMDIR-empty.dcm': DICOMDIR,
  'dicomdirtests/DICOMDIR-implicit': DICOMDIR,
  'dicomdirtests/DICOMDIR-nooffset': DICOMDIR,
  'dicomdirtests/DICOMDIR-nopatient': DICOMDIR,
  'dicomdirtests/DICOMDIR-reordered': DICOMDIR,
  'dicomdirtests/TINY_ALPHA/DICOMDIR': DICOMDIR,
  // Data set fragments used by pydicom's unit tests, not storable instances.
  'UN_sequence.dcm': 'missing SOP Instance UID',
  'empty_charset_LEI.dcm': 'missing SOP Instance UID',
  'nested_priv_SQ.dcm': 'missing SOP Instance UID',
  'no_meta_group_length.dcm': 'missing SOP Instance UID',
  'priv_SQ.dcm': 'missing SOP Instance UID',
  'meta_missing_tsyntax.dcm': 'missing Transfer Syntax UID (0002,0010) and data set encoding not recognisable',
};

describe('pydicom corpus', () => {
  const files = corpusFiles();
  let reference = new Map<string, PydicomMeta>();

  beforeAll(() => {
    requirePydicom();
    const rows = runPydicom<PydicomMeta[]>(['meta', ...files]);
    reference = new Map(rows.map((r) => [r.file, r]));
  });

  it('covers the whole corpus', () => {
    expect(files.length).toBeGreaterThan(60);
    for (const name of Object.keys(EXPECTED_REJECTIONS)) {
      expect(files, `${name} listed as rejected but not in the corpus`).toContain(`${CORPUS}/${name}`);
    }
  });

  it.each(files.map((f) => [relative(CORPUS, f), f]))('%s', (name, file) => {
    const result = parseDicom(new Uint8Array(readFileSync(file)));
    const expectedReason = EXPECTED_REJECTIONS[name];
    if (expectedReason !== undefined) {
      expect(result).toEqual({ ok: false, reason: expectedReason });
      return;
    }
    if (!result.ok) throw new Error(`${name} rejected: ${result.reason}`);
    const ref = reference.get(file);
    expect(ref?.error, `pydicom failed on ${name} but we accept it`).toBeUndefined();
    if (!ref) throw new Error(`no pydicom reference for ${name}`);
    const i = result.instance;
    expect({
      sop: i.sopInstanceUid,
      sopClass: i.sopClassUid,
      study: i.studyInstanceUid,
      series: i.seriesInstanceUid,
      modality: i.modality,
      rows: i.rows,
      columns: i.columns,
      frames: i.numberOfFrames,
      hasPixelData: i.hasPixelData,
      patientId: i.patientId,
      patientName: i.patientName,
    }).toEqual({
      sop: ref.sopInstanceUid,
      sopClass: ref.sopClassUid,
      study: ref.studyInstanceUid,
      series: ref.seriesInstanceUid,
      modality: ref.modality ?? '',
      rows: ref.rows ?? 0,
      columns: ref.columns ?? 0,
      // badVR.dcm has Number of Frames "1A"; pydicom gives up on it, we read it as 1.
      frames: ref.numberOfFrames ?? 1,
      hasPixelData: ref.hasPixelData,
      patientId: ref.patientId ?? '',
      patientName: ref.patientName ?? '',
    });
    if (ref.transferSyntaxUid) expect(i.transferSyntaxUid).toBe(ref.transferSyntaxUid);
  });
});
