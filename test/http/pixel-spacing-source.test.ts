/**
 * Where an instance's pixel spacing comes from (issue 11; PS3.3 10.7.1.1): a radiograph's Imager
 * Pixel Spacing is at the detector, so sizes from it are "at detector"; the Estimated
 * Radiographic Magnification Factor corrects it; a Pixel Spacing different from it is calibrated.
 * Generated DX files (pydicom's CT_small, 128 x 128, re-tagged), real import, real measurements.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CT_SMALL, seedImportedInstance } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis } from '../helpers/seed.ts';

let t: TestServer;
let reader: string;
let dir: string;
beforeAll(async () => {
  t = await startTestServer();
  reader = (await t.keyFor('radiologist')).key;
  dir = mkdtempSync(join(tmpdir(), 'mia-spacing-source-'));
});
afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

/** CT_small as a DX radiograph with new UIDs, its spacing attributes set by `edit` (Python on `ds`). */
function radiograph(name: string, edit: string): string {
  const out = join(dir, `${name}.dcm`);
  const script = [
    'import sys, pydicom',
    'from pydicom.uid import generate_uid',
    'ds = pydicom.dcmread(sys.argv[1])',
    'ds.SeriesInstanceUID = generate_uid()',
    'ds.SOPInstanceUID = generate_uid()',
    'ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID',
    'ds.Modality = "DX"',
    'del ds.PixelSpacing',
    edit,
    'ds.save_as(sys.argv[2], write_like_original=False)',
  ].join('\n');
  execFileSync('/usr/bin/python3', ['-c', script, CT_SMALL, out], { stdio: ['ignore', 'ignore', 'inherit'] });
  return out;
}

/** The instance as the API gives it, and a 100-pixel horizontal length measured on it. */
async function spacingAndLength(file: string) {
  const seeded = await seedImportedInstance(t, file);
  const list = await t.request('GET', `/v1/scans/${seeded.scanId}/instances`, { key: reader });
  expect(list.status).toBe(200);
  const instance = list.json.data.items[0];
  const made = await t.request('POST', `/v1/scans/${seeded.scanId}/measurements`, {
    key: reader,
    body: { instance_uid: seeded.instanceUid, frame: 0, kind: 'length', points: [[10, 64], [110, 64]] },
  });
  expect(made.status).toBe(201);
  return { scanId: seeded.scanId, spacing: instance.pixel_spacing, source: instance.pixel_spacing_source, length: made.json.data };
}

describe('pixel spacing source', () => {
  it('Imager Pixel Spacing alone: at the detector, and the length says so', async () => {
    const got = await spacingAndLength(radiograph('imager', 'ds.ImagerPixelSpacing = [0.2, 0.2]'));
    expect(got.spacing).toEqual([0.2, 0.2]);
    expect(got.source).toBe('imager_pixel_spacing');
    expect(got.length.length_mm).toBeCloseTo(20, 6);
    expect(got.length.pixel_spacing_source).toBe('imager_pixel_spacing');
    // The report lists it at the detector too (JSON and CSV).
    const db = t.server.services.db;
    const scanRow = (await db.get('SELECT s.id, st.study_uid, p.patient_id FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [got.scanId])) as { id: number; study_uid: string; patient_id: string };
    // A finding's box of 30 x 20 pixels: 6 x 4 mm at the detector.
    const instanceUid: string = got.length.instance_uid;
    await seedAnalysis(db, { scanId: got.scanId, scanRef: scanRow.id, studyUid: scanRow.study_uid, patientId: scanRow.patient_id }, [{ instanceUid, frame: 0, width: 30, height: 20 }]);
    const report = await t.request('POST', '/v1/reports', { key: reader, body: { scan_id: got.scanId } });
    expect(report.json.data.measurements[0]).toMatchObject({ kind: 'length', pixel_spacing_source: 'imager_pixel_spacing' });
    expect(report.json.data.findings[0].place).toMatchObject({ width_mm: 6, height_mm: 4, spacing_source: 'imager_pixel_spacing' });
    expect(report.json.data.lesions[0]).toMatchObject({ largest_diameter_mm: 6, spacing_source: 'imager_pixel_spacing' });
    const csv = await t.request('GET', `/v1/reports?scan_id=${got.scanId}&format=csv`, { key: reader });
    expect(csv.text).toContain('length 20.0 mm (detector) (image');
    expect(csv.text).toContain('largest 6 mm (detector)');
  });

  it('Imager Pixel Spacing with a magnification factor of 1.25: divided by it, 16 mm at the patient', async () => {
    const got = await spacingAndLength(radiograph('ermf', 'ds.ImagerPixelSpacing = [0.2, 0.2]\nds.EstimatedRadiographicMagnificationFactor = 1.25'));
    expect(got.spacing).toEqual([0.16, 0.16]);
    expect(got.source).toBe('imager_corrected_by_magnification');
    expect(got.length.length_mm).toBeCloseTo(16, 6);
    expect(got.length.pixel_spacing_source).toBe('imager_corrected_by_magnification');
  });

  it('Pixel Spacing equal to Imager Pixel Spacing: not calibrated, still at the detector', async () => {
    const got = await spacingAndLength(radiograph('equal', 'ds.ImagerPixelSpacing = [0.2, 0.2]\nds.PixelSpacing = [0.2, 0.2]'));
    expect(got).toMatchObject({ spacing: [0.2, 0.2], source: 'imager_pixel_spacing' });
  });

  it('Pixel Spacing different from Imager Pixel Spacing, or with a calibration type: calibrated, used as is', async () => {
    const differs = await spacingAndLength(radiograph('calibrated', 'ds.ImagerPixelSpacing = [0.2, 0.2]\nds.PixelSpacing = [0.15, 0.15]'));
    expect(differs).toMatchObject({ spacing: [0.15, 0.15], source: 'calibrated' });
    expect(differs.length.length_mm).toBeCloseTo(15, 6);
    const typed = await spacingAndLength(radiograph('fiducial', 'ds.PixelSpacing = [0.15, 0.15]\nds.PixelSpacingCalibrationType = "FIDUCIAL"'));
    expect(typed).toMatchObject({ spacing: [0.15, 0.15], source: 'calibrated' });
  });

  it('Pixel Spacing alone (CT): in the patient', async () => {
    const got = await spacingAndLength(CT_SMALL);
    expect(got.source).toBe('pixel_spacing');
    expect(got.length.pixel_spacing_source).toBe('pixel_spacing');
    expect(got.length.length_mm).toBeCloseTo(66.1468, 4);
  });
});
