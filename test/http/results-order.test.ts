/**
 * A result's findings come in one order wherever they are read: the model's by confidence,
 * highest first (the worklist's "top" finding is the first), ties in the order the model gave
 * them, then the reader's own. The results page reads its findings apart from the single result
 * (server/store/results.ts) and so must put them in the same order.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { seedAnalysis } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

type ShownFinding = { id: string; confidence: number; source: string; location: { x: number } };

describe('the order of a result\'s findings', () => {
  it('is the same on the results page as on the scan\'s own result: model findings by confidence, ties as stored, then the reader\'s', async () => {
    const image = await seedImportedInstance(t);
    const { db } = t.server.services;
    const scanRef = ((await db.get('SELECT id FROM scans WHERE scan_id = ?', [image.scanId])) as { id: number }).id;
    // x tells the stored findings apart: 1 to 4 in the order the model gave them.
    await seedAnalysis(db, { scanId: image.scanId, patientId: '', studyUid: '', scanRef }, [
      { confidence: 0.6, x: 1, instanceUid: image.instanceUid },
      { confidence: 0.9, x: 2, instanceUid: image.instanceUid },
      { confidence: 0.75, x: 3, instanceUid: image.instanceUid },
      { confidence: 0.9, x: 4, instanceUid: image.instanceUid },
    ]);
    const reader = await t.keyFor('radiologist', { email: 'order@hospital.test' });
    const added = await t.request('POST', `/v1/scans/${image.scanId}/findings`, {
      key: reader.key,
      body: { source: 'reader', label: 'tumor_detected', instance_uid: image.instanceUid, location: { x: 60, y: 50, width: 30, height: 20 } },
    });
    expect(added.status).toBe(201);

    // Version 1.1 names each finding's source.
    const headers = { 'API-Version': '1.1' };
    const own = (await t.request('GET', `/v1/scans/${image.scanId}/results`, { headers })).json.data.findings as ShownFinding[];
    const page = await t.request('GET', `/v1/scan/results?scan_id=${image.scanId}`, { headers });
    expect(page.status).toBe(200);
    const listed = (page.json.data.items as { findings: ShownFinding[] }[])[0]?.findings ?? [];

    expect(own.map((f) => [f.source, f.location.x])).toEqual([
      ['model', 2],
      ['model', 4],
      ['model', 3],
      ['model', 1],
      ['reader', 60],
    ]);
    expect(listed.map((f) => f.id)).toEqual(own.map((f) => f.id));
  });
});
