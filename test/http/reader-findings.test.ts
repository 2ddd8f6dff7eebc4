/**
 * Issue 11, reading tools: a radiologist adds a finding the model missed (a box on an image of
 * the scan, a glossary label) and says why they reject one; both enter the report, its
 * recommendation and the exports, and a final report locks them (addenda instead).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCsv } from '../helpers/csv.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { seedAnalysis } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let reader: { key: string; userId: string };
beforeAll(async () => {
  t = await startTestServer();
  reader = await t.keyFor('radiologist', { email: 'reader@hospital.test' });
});
afterAll(async () => {
  await t.close();
});

/** pydicom's CT_small (128 x 128, 0.661 mm pixels) with the model's infarct on it. */
async function analysedCt() {
  const image = await seedImportedInstance(t);
  const { db } = t.server.services;
  const scanRef = ((await db.get('SELECT id FROM scans WHERE scan_id = ?', [image.scanId])) as { id: number }).id;
  await seedAnalysis(db, { scanId: image.scanId, patientId: '', studyUid: '', scanRef }, [
    { label: 'infarct_detected', confidence: 0.7, x: 10, y: 10, width: 20, height: 20, instanceUid: image.instanceUid },
  ]);
  return image;
}

const add = (scanId: string, body: Record<string, unknown>, key = reader.key) => t.request('POST', `/v1/scans/${scanId}/findings`, { key, body });
const results = async (scanId: string) => (await t.request('GET', `/v1/scans/${scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data;

describe('reader-drawn findings and reasons for rejecting', () => {
  it('adds a glossary-labelled box as an accepted reader finding that the report, its recommendation and the CSV carry', async () => {
    const image = await analysedCt();
    const box = { x: 60, y: 50, width: 30, height: 20 };
    const added = await add(image.scanId, { source: 'reader', label: 'tumor_detected', instance_uid: image.instanceUid, location: box });
    expect(added.status).toBe(201);
    expect(added.json.data).toMatchObject({ label: 'tumor_detected', source: 'reader', review: 'accepted', confidence: 1, location: box, place: { slice: 1, slices: 1 } });
    expect(added.json.data.place.width_mm).toBeCloseTo(30 * 0.661, 0);

    const infarct = (await results(image.scanId)).findings.find((f: { label: string }) => f.label === 'infarct_detected');
    expect(infarct.source).toBe('model');
    const rejected = await t.request('PATCH', `/v1/findings/${infarct.id}`, { key: reader.key, body: { review: 'rejected', reason: 'Beam-hardening artefact, not an infarct.' } });
    expect(rejected.status).toBe(200);
    expect(rejected.json.data).toMatchObject({ review: 'rejected', review_reason: 'Beam-hardening artefact, not an infarct.' });

    const report = (await t.request('POST', '/v1/reports', { key: reader.key, body: { scan_id: image.scanId } })).json.data;
    expect(report.findings).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: added.json.data.id, source: 'reader', review: 'accepted' }),
        expect.objectContaining({ id: infarct.id, review: 'rejected', review_reason: 'Beam-hardening artefact, not an infarct.' }),
      ]),
    );
    // The reader's tumour drives the recommendation; the rejected infarct does not.
    expect(report.recommendation_basis).toBe('verdicts');
    expect(report.recommendation).toMatch(/tumour/i);
    expect(report.recommendation).not.toMatch(/infarct/i);

    const csv = parseCsv((await t.request('GET', `/v1/scan/results?format=csv&scan_id=${image.scanId}`, { key: reader.key, headers: { 'API-Version': '1.1' } })).text);
    const h = csv[0]!;
    const rows = csv.slice(1).map((r) => [r[h.indexOf('label')], r[h.indexOf('source')], r[h.indexOf('review')], r[h.indexOf('review_reason')]]);
    expect(rows).toEqual(
      expect.arrayContaining([
        ['tumor_detected', 'reader', 'accepted', ''],
        ['infarct_detected', 'model', 'rejected', 'Beam-hardening artefact, not an infarct.'],
      ]),
    );

    // Final: the verdicts and the findings are locked; a change goes through an addendum.
    expect((await t.request('PATCH', `/v1/reports/${report.id}`, { key: reader.key, body: { status: 'final' } })).status).toBe(200);
    const late = await add(image.scanId, { source: 'reader', label: 'tumor_detected', instance_uid: image.instanceUid, location: box });
    expect(late.status).toBe(409);
    expect(late.json.error.details).toContain(`/v1/reports/${report.id}/addenda`);
    // ... where the missed finding is added, signed, and recorded; the signed snapshot stays.
    const second = { x: 5, y: 80, width: 10, height: 10 };
    const withAddendum = await t.request('POST', `/v1/reports/${report.id}/addenda`, {
      key: reader.key,
      body: { text: 'A second small lesion on review.', new_findings: [{ label: 'tumor_detected', instance_uid: image.instanceUid, location: second }] },
    });
    expect(withAddendum.status).toBe(201);
    const [change] = withAddendum.json.data.addenda[0].finding_changes;
    expect(change).toMatchObject({ label: 'tumor_detected', from: null, to: 'accepted', added: true });
    const csv2 = parseCsv((await t.request('GET', `/v1/reports?format=csv&scan_id=${image.scanId}`, { key: reader.key })).text);
    expect(csv2[1]![csv2[0]!.indexOf('addenda')]).toContain(`[verdicts: tumor_detected ${change.finding_id}: added by the reader, accepted]`);
    expect(withAddendum.json.data.findings).toHaveLength(2);
    const now = (await results(image.scanId)).findings.find((f: { id: string }) => f.id === change.finding_id);
    expect(now).toMatchObject({ source: 'reader', review: 'accepted', location: second });
    // The same checks as before signing: a label outside the glossary is refused, and nothing is added.
    const refused = await t.request('POST', `/v1/reports/${report.id}/addenda`, {
      key: reader.key,
      body: { text: 'x', new_findings: [{ label: 'made_up', instance_uid: image.instanceUid, location: second }] },
    });
    expect(refused.status).toBe(400);
    expect((await t.request('GET', `/v1/reports/${report.id}`, { key: reader.key })).json.data.addenda).toHaveLength(1);
  });

  it('refuses a label outside the glossary, an image of another scan, a box off the image, a reason without a rejection, and readers without write:reports', async () => {
    const image = await analysedCt();
    const other = await seedImportedInstance(t, '/usr/lib/python3/dist-packages/pydicom/data/test_files/MR_small.dcm');
    const box = { x: 1, y: 1, width: 5, height: 5 };
    const body = { source: 'reader', label: 'tumor_detected', instance_uid: image.instanceUid, location: box };
    expect((await add(image.scanId, { ...body, label: 'made_up' })).status).toBe(400);
    expect((await add(image.scanId, { ...body, instance_uid: other.instanceUid })).status).toBe(400);
    expect((await add(image.scanId, { ...body, location: { x: 120, y: 0, width: 20, height: 5 } })).status).toBe(400);
    expect((await add(image.scanId, { ...body, source: 'model' })).status).toBe(400);
    const viewer = await t.keyFor('data_engineer');
    expect((await add(image.scanId, body, viewer.key)).status).toBe(403);
    const infarct = (await results(image.scanId)).findings[0];
    expect((await t.request('PATCH', `/v1/findings/${infarct.id}`, { key: reader.key, body: { review: 'accepted', reason: 'why' } })).status).toBe(400);
  });
});
