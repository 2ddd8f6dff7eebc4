import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

let t: TestServer;
let reviewer: string;
beforeAll(async () => {
  t = await startTestServer();
  reviewer = (await t.keyFor('radiologist', { scopes: ['write:reports'] })).key;
});
afterAll(async () => {
  await t.close();
});

async function analysedFindings(): Promise<{ scanId: string; patientId: string; ids: string[] }> {
  const scan = await seedScan(t.server.services.db);
  await seedAnalysis(t.server.services.db, scan, [{ confidence: 0.9 }, { confidence: 0.7 }]);
  const reply = await t.request('GET', `/v1/scans/${scan.scanId}/results`, { headers: { 'API-Version': '1.1' } });
  return { scanId: scan.scanId, patientId: scan.patientId, ids: reply.json.data.findings.map((f: any) => f.id) };
}

describe('PATCH /v1/findings/{id}', () => {
  it('records accept and reject, shows them in v1.1 results, and clears with null', async () => {
    const { scanId, ids } = await analysedFindings();
    const accepted = await t.request('PATCH', `/v1/findings/${ids[0]}`, { key: reviewer, body: { review: 'accepted' } });
    expect(accepted.status).toBe(200);
    expect(accepted.json.data).toMatchObject({ id: ids[0], review: 'accepted' });
    expect((await t.request('PATCH', `/v1/findings/${ids[1]}`, { key: reviewer, body: { review: 'rejected' } })).status).toBe(200);

    const result = await t.request('GET', `/v1/scans/${scanId}/results`, { headers: { 'API-Version': '1.1' } });
    expect(result.json.data.findings.map((f: any) => f.review)).toEqual(['accepted', 'rejected']);

    const cleared = await t.request('PATCH', `/v1/findings/${ids[0]}`, { key: reviewer, body: { review: null } });
    expect(cleared.json.data.review).toBeNull();
  });

  it('is audited as findings.review with the patient', async () => {
    const { patientId, ids } = await analysedFindings();
    await t.request('PATCH', `/v1/findings/${ids[0]}`, { key: reviewer, body: { review: 'rejected' } });
    const audit = await t.request('GET', `/v1/audit?action=findings.review&patient_id=${patientId}`);
    expect(audit.json.data.items).toHaveLength(1);
    expect(audit.json.data.items[0]).toMatchObject({ action: 'findings.review', outcome: 'success', patient_id: patientId });
    expect(audit.json.data.items[0].target).toMatch(/ review:rejected$/);
  });

  it('moves the scan along as it is read: in_review, reviewed, reopened, reported; a reported scan is not re-analysed', async () => {
    const { scanId, ids } = await analysedFindings();
    const status = async (): Promise<string> => (await t.request('GET', `/v1/scans/${scanId}`)).json.data.status;
    expect(await status()).toBe('analyzed');
    await t.request('PATCH', `/v1/findings/${ids[0]}`, { key: reviewer, body: { review: 'accepted' } });
    expect(await status()).toBe('in_review');
    await t.request('PATCH', `/v1/findings/${ids[1]}`, { key: reviewer, body: { review: 'rejected' } });
    expect(await status()).toBe('reviewed');
    await t.request('PATCH', `/v1/findings/${ids[1]}`, { key: reviewer, body: { review: null } });
    expect(await status()).toBe('in_review');

    const draft = (await t.request('POST', '/v1/reports', { key: reviewer, body: { scan_id: scanId } })).json.data;
    expect(await status()).toBe('in_review');
    expect((await t.request('PATCH', `/v1/reports/${draft.id}`, { key: reviewer, body: { status: 'final' } })).status).toBe(200);
    const scan = (await t.request('GET', `/v1/scans/${scanId}`)).json.data;
    expect(scan).toMatchObject({ status: 'reported', status_reason: `report ${draft.id} finalized` });
    const again = await t.request('POST', `/v1/scans/${scanId}/analyses`, { body: {} });
    expect(again.status).toBe(409);
    expect(await status()).toBe('reported');
  });

  it('a radiologist key with only the role\'s default scopes reviews findings and writes and finalizes the report', async () => {
    // Issue 11: reviewing and reporting is the radiologist's work, no extra grant needed.
    const { scanId, ids } = await analysedFindings();
    const radiologist = (await t.keyFor('radiologist', { email: 'default-scopes@hospital.test' })).key;
    const me = await t.request('GET', '/v1/auth/me', { key: radiologist });
    expect(me.json.data.user.scopes).toEqual(['read:scans', 'read:reports', 'write:reports']);
    expect((await t.request('PATCH', `/v1/findings/${ids[0]}`, { key: radiologist, body: { review: 'accepted' } })).status).toBe(200);
    expect((await t.request('PATCH', `/v1/findings/${ids[1]}`, { key: radiologist, body: { review: 'rejected' } })).status).toBe(200);
    const draft = await t.request('POST', '/v1/reports', { key: radiologist, body: { scan_id: scanId } });
    expect(draft.status).toBe(201);
    const final = await t.request('PATCH', `/v1/reports/${draft.json.data.id}`, { key: radiologist, body: { status: 'final' } });
    expect(final.status).toBe(200);
    expect(final.json.data.status).toBe('final');
  });

  it('404 for an unknown finding, 400 for an unknown verdict, 403 without write:reports', async () => {
    const { ids } = await analysedFindings();
    expect((await t.request('PATCH', '/v1/findings/fnd_nope', { key: reviewer, body: { review: 'accepted' } })).status).toBe(404);
    const bad = await t.request('PATCH', `/v1/findings/${ids[0]}`, { key: reviewer, body: { review: 'maybe' } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.details).toContain('review');
    const plain = (await t.keyFor('data_engineer', { email: 'plain@hospital.test' })).key;
    const denied = await t.request('PATCH', `/v1/findings/${ids[0]}`, { key: plain, body: { review: 'accepted' } });
    expect(denied.status).toBe(403);
    expect(denied.json.error.details).toBe('required scope: write:reports');
  });
});
