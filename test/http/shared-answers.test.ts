/**
 * Lists asked again and again (the worklist, results) are answered from what the last request
 * computed while the store is unchanged (server/http/shared-answers.ts): never older than the
 * store, in every format the same bytes as a fresh answer, and audited every time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase } from '#server/store/sqlite.ts';
import { onPostgres, startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis, seedScan, type SeededScan } from '../helpers/seed.ts';

let t: TestServer;
let reviewer: string;
let auditor: string;
const patient = `SHARED-${process.pid}`;
let scan: SeededScan;
beforeAll(async () => {
  t = await startTestServer();
  reviewer = (await t.keyFor('radiologist', { email: 'shared-reviewer@hospital.test' })).key;
  auditor = (await t.keyFor('admin', { email: 'shared-auditor@hospital.test' })).key;
  scan = await seedScan(t.server.services.db, { patientId: patient });
  await seedAnalysis(t.server.services.db, scan, [{ confidence: 0.9 }, { confidence: 0.7 }]);
});
afterAll(async () => {
  await t.close();
});

const V11 = { headers: { 'API-Version': '1.1' } };
const results = (query = ''): Promise<any> => t.request('GET', `/v1/scan/results?patient_id=${patient}${query}`, V11);

/** The body without what belongs to one request (its id and time). */
function withoutEnvelope(text: string): string {
  return text.replace(/"request_id":"[^"]*"/g, '').replace(/"timestamp":"[^"]*"/g, '').replace(/<request_id>[^<]*<\/request_id>/g, '').replace(/<timestamp>[^<]*<\/timestamp>/g, '');
}

describe('lists answered again while the store is unchanged', () => {
  it('gives the same answer, with this request\'s own id, in JSON, CSV and XML', async () => {
    for (const format of ['', '&format=csv', '&format=xml']) {
      const first = await results(format);
      const second = await results(format);
      expect(first.status).toBe(200);
      expect(second.status).toBe(200);
      expect(withoutEnvelope(second.text)).toBe(withoutEnvelope(first.text));
      expect(second.headers.get('content-type')).toBe(first.headers.get('content-type'));
    }
    const [a, b] = [await results(), await results()];
    expect(a.json.meta.request_id).not.toBe(b.json.meta.request_id);
    expect(a.json.data.items).toHaveLength(1);
  });

  it('shows a review made since at once', async () => {
    const before = await results();
    const ids = before.json.data.items[0].findings.map((f: any) => f.id);
    expect(before.json.data.items[0].findings.map((f: any) => f.review)).toEqual([null, null]);
    expect((await t.request('PATCH', `/v1/findings/${ids[0]}`, { key: reviewer, body: { review: 'accepted' } })).status).toBe(200);
    expect((await results()).json.data.items[0].findings.map((f: any) => f.review)).toEqual(['accepted', null]);
    expect((await t.request('PATCH', `/v1/findings/${ids[0]}`, { key: reviewer, body: { review: null } })).status).toBe(200);
    expect((await results()).json.data.items[0].findings.map((f: any) => f.review)).toEqual([null, null]);
  });

  it('shows a scan another process stored since (another connection to the same file)', async () => {
    if (onPostgres()) return; // a hub node keeps no answers: PostgreSQL's readVersion is null
    const scansBefore = (await t.request('GET', `/v1/scans?patient_id=${patient}`)).json.data.items.length;
    const studiesBefore = (await t.request('GET', `/v1/studies?patient_id=${patient}`)).json.data.items.length;
    expect((await results()).json.data.items).toHaveLength(1);
    const other = openDatabase(t.dataDir);
    try {
      await seedAnalysis(other, await seedScan(other, { patientId: patient }), [{ confidence: 0.6 }]);
    } finally {
      await other.close();
    }
    expect((await results()).json.data.items).toHaveLength(2);
    expect((await t.request('GET', `/v1/scans?patient_id=${patient}`)).json.data.items).toHaveLength(scansBefore + 1);
    expect((await t.request('GET', `/v1/studies?patient_id=${patient}`)).json.data.items).toHaveLength(studiesBefore + 1);
  });

  it('audits every request with the patients it returned', async () => {
    const target = `SHARED-AUDIT-${process.pid}`;
    const own = await seedScan(t.server.services.db, { patientId: target });
    await seedAnalysis(t.server.services.db, own, [{ confidence: 0.8 }]);
    for (let i = 0; i < 3; i++) expect((await t.request('GET', `/v1/scan/results?patient_id=${target}`)).status).toBe(200);
    const events = (await t.request('GET', `/v1/audit?action=results.list&patient_id=${target}&limit=10`, { key: auditor })).json.data.items;
    expect(events).toHaveLength(3);
    for (const event of events) expect(event).toMatchObject({ outcome: 'success', patient_id: target, patient_ids: [target] });
  });
});
