import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { philipsMprage } from '../helpers/enhanced.ts';
import { seedImportedInstance, type SeededInstance } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis } from '../helpers/seed.ts';

let t: TestServer;
let reader: string;
let otherReader: string;
let viewerOnly: string;
let ct: SeededInstance;
beforeAll(async () => {
  t = await startTestServer();
  reader = (await t.keyFor('radiologist', { email: 'reader-a@example.org' })).key;
  otherReader = (await t.keyFor('radiologist', { email: 'reader-b@example.org' })).key;
  viewerOnly = (await t.keyFor('data_engineer')).key;
  ct = await seedImportedInstance(t);
});
afterAll(async () => {
  await t.close();
});

const path = (): string => `/v1/scans/${ct.scanId}/measurements`;
const roi = () => ({
  instance_uid: ct.instanceUid,
  frame: 0,
  kind: 'ellipse',
  points: [[10, 12], [40, 30.5]],
});
/** CT_small.dcm: Pixel Spacing 0.661468\\0.661468. */
const SPACING = 0.661468;

describe('measurements', () => {
  it('keeps a reader\'s ROI and gives it back to that reader only', async () => {
    const created = await t.request('POST', path(), { key: reader, body: roi() });
    expect(created.status).toBe(201);
    expect(created.json.data).toMatchObject({
      id: expect.stringMatching(/^msr_/),
      scan_id: ct.scanId,
      instance_uid: ct.instanceUid,
      kind: 'ellipse',
      points: [[10, 12], [40, 30.5]],
      length_mm: null,
      value: null,
      unit: 'HU',
    });
    // Computed by the server from the stored frame: the drawn ellipse's area, the pixels' HU.
    expect(created.json.data.area_mm2).toBeCloseTo((Math.PI / 4) * 30 * 18.5 * SPACING * SPACING, 6);
    expect(created.json.data.mean).toEqual(expect.any(Number));
    expect(created.json.data.sd).toBeGreaterThan(0);
    const mine = await t.request('GET', path(), { key: reader });
    expect(mine.status).toBe(200);
    expect(mine.json.data.items.map((m: { id: string }) => m.id)).toEqual([created.json.data.id]);
    expect(mine.json.data.next_cursor).toBeNull();
    const second = await t.request('POST', path(), { key: reader, body: { ...roi(), kind: 'rectangle' } });
    const first = await t.request('GET', `${path()}?limit=1`, { key: reader });
    expect(first.json.data.items.map((m: { id: string }) => m.id)).toEqual([created.json.data.id]);
    const next = await t.request('GET', `${path()}?limit=1&cursor=${first.json.data.next_cursor}`, { key: reader });
    expect(next.json.data.items.map((m: { id: string }) => m.id)).toEqual([second.json.data.id]);
    const theirs = await t.request('GET', path(), { key: otherReader });
    expect(theirs.json.data.items).toEqual([]);
  });

  it('refuses a wrong point count, a frame out of range, an image of another scan and values from the client', async () => {
    expect((await t.request('POST', path(), { key: reader, body: { ...roi(), mean: 40 } })).status).toBe(400);
    const probeWithTwo = await t.request('POST', path(), { key: reader, body: { ...roi(), kind: 'probe' } });
    expect(probeWithTwo.status).toBe(400);
    const frame = await t.request('POST', path(), { key: reader, body: { ...roi(), frame: 3 } });
    expect(frame.status).toBe(400);
    const other = await seedImportedInstance(t, '/usr/lib/python3/dist-packages/pydicom/data/test_files/MR_small.dcm');
    const foreign = await t.request('POST', path(), { key: reader, body: { ...roi(), instance_uid: other.instanceUid } });
    expect(foreign.status).toBe(404);
  });

  it('needs write:reports to create; only the author deletes; audited with the patient', async () => {
    expect((await t.request('POST', path(), { key: viewerOnly, body: roi() })).status).toBe(403);
    const created = await t.request('POST', path(), { key: reader, body: { ...roi(), kind: 'probe', points: [[5, 5]] } });
    expect(created.status).toBe(201);
    const id: string = created.json.data.id;
    expect((await t.request('DELETE', `/v1/measurements/${id}`, { key: otherReader })).status).toBe(403);
    const deleted = await t.request('DELETE', `/v1/measurements/${id}`, { key: reader });
    expect(deleted.status).toBe(200);
    expect(deleted.json.data.value).toEqual(expect.any(Number));
    expect((await t.request('DELETE', `/v1/measurements/${id}`, { key: reader })).status).toBe(404);
    const audit = await t.request('GET', '/v1/audit?action=measurements.delete');
    const events: Array<{ outcome: string; target: string; patient_id: string | null }> = audit.json.data.items;
    expect(events.map((e) => e.outcome).sort()).toEqual(['denied', 'error', 'success'].sort());
    const success = events.find((e) => e.outcome === 'success');
    expect(success).toMatchObject({ target: `measurement:${id} scan:${ct.scanId}`, patient_id: expect.any(String) });
  });

  it('are listed in the author\'s report (JSON, CSV, XML); a final report keeps those made until it was signed', async () => {
    const scanRow = (await t.server.services.db.get('SELECT s.id, st.study_uid, p.patient_id FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [ct.scanId])) as { id: number; study_uid: string; patient_id: string };
    await seedAnalysis(t.server.services.db, { scanId: ct.scanId, scanRef: scanRow.id, studyUid: scanRow.study_uid, patientId: scanRow.patient_id }, [{}]);
    const author = (await t.keyFor('radiologist', { email: 'reader-c@example.org' })).key;
    await t.request('POST', path(), { key: author, body: { ...roi(), kind: 'length', points: [[0, 0], [100, 0]] } });
    await t.request('POST', path(), { key: otherReader, body: roi() });
    const draft = await t.request('POST', '/v1/reports', { key: author, body: { scan_id: ct.scanId } });
    expect(draft.status).toBe(201);
    const reportId: string = draft.json.data.id;
    expect(draft.json.data.measurements.map((m: { kind: string }) => m.kind)).toEqual(['length']);
    expect(draft.json.data.measurements[0].length_mm).toBeCloseTo(100 * SPACING, 6);
    const csv = await t.request('GET', `/v1/reports?scan_id=${ct.scanId}&format=csv`, { key: author });
    expect(csv.text.split('\n')[0]).toMatch(/,lesions,measurements\r?$/);
    expect(csv.text).toContain(`length 66.1 mm (image ${ct.instanceUid} frame 1)`);
    const xml = await t.request('GET', `/v1/reports?scan_id=${ct.scanId}&format=xml`, { key: author });
    expect(xml.text).toContain('<measurements><measurement>');
    expect((await t.request('PATCH', `/v1/reports/${reportId}`, { key: author, body: { status: 'final' } })).status).toBe(200);
    t.clock.advance(60_000);
    await t.request('POST', path(), { key: author, body: { ...roi(), kind: 'probe', points: [[3, 3]] } });
    const final = await t.request('GET', `/v1/reports/${reportId}`, { key: author });
    expect(final.json.data.measurements).toHaveLength(1);
  });

  it('uses the frame\'s own pixel spacing and rescale on an Enhanced MR (nibabel\'s philips_mprage.dcm, slope 2.1079 per frame)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'mia-measure-enhanced-'));
    try {
      const file = join(dir, 'philips_mprage.dcm');
      writeFileSync(file, philipsMprage());
      const mr = await seedImportedInstance(t, file);
      const instance = (await t.request('GET', `/v1/scans/${mr.scanId}/instances`)).json.data.items[0];
      const spacing: number[] = instance.frame_values?.[88]?.pixel_spacing ?? instance.pixel_spacing;
      const measurements = `/v1/scans/${mr.scanId}/measurements`;
      const length = await t.request('POST', measurements, { key: reader, body: { instance_uid: mr.instanceUid, frame: 88, kind: 'length', points: [[10, 20], [40, 60]] } });
      expect(length.status).toBe(201);
      expect(length.json.data.length_mm).toBeCloseTo(Math.hypot(30 * (spacing[1] ?? 0), 40 * (spacing[0] ?? 0)), 6);
      expect(length.json.data.unit).toBeNull();
      // The probe is the raw stored value times the frame's slope (the raw endpoint's headers).
      const raw = await fetch(`${t.url}/v1/instances/${mr.instanceUid}/frames/88/raw`, { headers: { Authorization: `Bearer ${t.adminKey}`, Accept: '*/*' } });
      const body = Buffer.from(await raw.arrayBuffer());
      const slope = Number(raw.headers.get('x-rescale-slope'));
      const intercept = Number(raw.headers.get('x-rescale-intercept'));
      expect(slope).toBeCloseTo(2.1079, 3);
      const columns = Number(raw.headers.get('x-columns'));
      const bytes = new DataView(body.buffer, body.byteOffset, body.byteLength);
      const stored = bytes.getUint16((40 * columns + 30) * 2, true);
      const probe = await t.request('POST', measurements, { key: reader, body: { instance_uid: mr.instanceUid, frame: 88, kind: 'probe', points: [[30.5, 40.5]] } });
      expect(probe.json.data.value).toBeCloseTo(stored * slope + intercept, 3);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('PATCH moves a measurement\'s ends (author only, values computed again); one a final report lists stays as signed (409)', async () => {
    const scan = await seedImportedInstance(t);
    const measurements = `/v1/scans/${scan.scanId}/measurements`;
    const author = (await t.keyFor('radiologist', { email: 'reader-e@example.org' })).key;
    const made = await t.request('POST', measurements, { key: author, body: { instance_uid: scan.instanceUid, frame: 0, kind: 'length', points: [[0, 0], [100, 0]] } });
    const id: string = made.json.data.id;
    const patch = (body: unknown, key = author) => t.request('PATCH', `/v1/measurements/${id}`, { key, body });

    const moved = await patch({ points: [[0, 0], [30, 40]] });
    expect(moved.status).toBe(200);
    expect(moved.json.data).toMatchObject({ id, kind: 'length', points: [[0, 0], [30, 40]], created_at: made.json.data.created_at });
    expect(moved.json.data.length_mm).toBeCloseTo(50 * SPACING, 6);
    expect((await t.request('GET', measurements, { key: author })).json.data.items[0].length_mm).toBeCloseTo(50 * SPACING, 6);

    // Validated like a new one; another reader's is not theirs to move.
    expect((await patch({ points: [[1, 1]] })).status).toBe(400);
    expect((await patch({ points: [[0, 0], [1, 1]], kind: 'probe' })).status).toBe(400);
    expect((await patch({ points: [[0, 0], ['a', 1]] })).status).toBe(400);
    expect((await patch({ points: [[0, 0], [1, 1]] }, otherReader)).status).toBe(403);
    expect((await patch({ points: [[0, 0], [1, 1]] }, viewerOnly)).status).toBe(403);
    expect((await t.request('PATCH', '/v1/measurements/msr_000000000000000000000000', { key: author, body: { points: [[0, 0], [1, 1]] } })).status).toBe(404);

    // An ROI's mean and area follow its new corners.
    const roiMade = await t.request('POST', measurements, { key: author, body: { instance_uid: scan.instanceUid, frame: 0, kind: 'rectangle', points: [[10, 10], [20, 20]] } });
    const roiMoved = await t.request('PATCH', `/v1/measurements/${roiMade.json.data.id}`, { key: author, body: { points: [[40, 40], [80, 60]] } });
    expect(roiMoved.json.data.area_mm2).toBeCloseTo(40 * 20 * SPACING * SPACING, 6);
    expect(roiMoved.json.data.mean).not.toBe(roiMade.json.data.mean);

    // Signed: the report lists it, so it can be neither moved nor deleted; the 409 names the report.
    const scanRow = (await t.server.services.db.get('SELECT s.id, st.study_uid, p.patient_id FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [scan.scanId])) as { id: number; study_uid: string; patient_id: string };
    await seedAnalysis(t.server.services.db, { scanId: scan.scanId, scanRef: scanRow.id, studyUid: scanRow.study_uid, patientId: scanRow.patient_id }, [{}]);
    const report = (await t.request('POST', '/v1/reports', { key: author, body: { scan_id: scan.scanId } })).json.data;
    expect((await t.request('PATCH', `/v1/reports/${report.id}`, { key: author, body: { status: 'final' } })).status).toBe(200);
    t.clock.advance(60_000);
    const refused = await patch({ points: [[0, 0], [10, 0]] });
    expect(refused.status).toBe(409);
    expect(refused.json).toMatchObject({ status: 'error', error: { code: 409 } });
    expect(refused.json.error.details).toContain(`POST /v1/reports/${report.id}/addenda`);
    expect((await t.request('DELETE', `/v1/measurements/${id}`, { key: author })).status).toBe(409);
    const signed = (await t.request('GET', `/v1/reports/${report.id}`, { key: author })).json.data;
    expect(signed.measurements.find((m: { id: string }) => m.id === id)).toMatchObject({ points: [[0, 0], [30, 40]] });
    // One drawn after signing is not in the report: free to move.
    const later = await t.request('POST', measurements, { key: author, body: { instance_uid: scan.instanceUid, frame: 0, kind: 'length', points: [[0, 0], [10, 0]] } });
    expect((await t.request('PATCH', `/v1/measurements/${later.json.data.id}`, { key: author, body: { points: [[0, 0], [20, 0]] } })).status).toBe(200);
    const audit = await t.request('GET', '/v1/audit?action=measurements.update');
    expect(audit.json.data.items.some((e: { target: string; outcome: string }) => e.outcome === 'success' && e.target === `measurement:${id} scan:${scan.scanId}`)).toBe(true);
  });
});
