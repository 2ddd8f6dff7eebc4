import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

let t: TestServer;
let engineer: string;
beforeAll(async () => {
  t = await startTestServer();
  engineer = (await t.keyFor('data_engineer', { scopes: ['write:scans'] })).key;
});
afterAll(async () => {
  await t.close();
});

const setStatus = (scanId: string, status: unknown, key?: string) =>
  t.request('POST', `/v1/scans/${scanId}`, { body: { status }, ...(key ? { key } : {}) });

describe('POST /v1/scans/{scan_id} status changes', () => {
  it('walks a scan through review to reported and archived', async () => {
    const scan = await seedScan(t.server.services.db);
    await seedAnalysis(t.server.services.db, scan, [{}]);
    for (const status of ['in_review', 'reviewed', 'reported', 'archived']) {
      const reply = await setStatus(scan.scanId, status, engineer);
      expect(reply.status).toBe(200);
      expect(reply.json.data).toMatchObject({ scan_id: scan.scanId, status });
    }
  });

  it('409 names the allowed targets; the scan keeps its status', async () => {
    const scan = await seedScan(t.server.services.db);
    const reply = await setStatus(scan.scanId, 'reported');
    expect(reply.status).toBe(409);
    expect(reply.json.error.details).toBe('allowed targets from received: queued, archived');
    expect((await t.request('GET', `/v1/scans/${scan.scanId}`)).json.data.status).toBe('received');
  });

  it('400 for a status only the system sets, or a non-string', async () => {
    const scan = await seedScan(t.server.services.db);
    const system = await setStatus(scan.scanId, 'analyzed');
    expect(system.status).toBe(400);
    expect(system.json.error.message).toMatch(/set by the system/);
    const number = await setStatus(scan.scanId, 7);
    expect(number.status).toBe(400);
    expect(number.json.error.details).toMatch(/^status:/);
  });

  it('404 for an unknown scan, 400 for an id that is not a UID', async () => {
    expect((await setStatus('1.2.3.4.5.6', 'queued')).status).toBe(404);
    expect((await setStatus('not-a-uid', 'queued')).status).toBe(400);
  });

  it('requeues an analysed scan (analyse again)', async () => {
    const scan = await seedScan(t.server.services.db);
    await seedAnalysis(t.server.services.db, scan, []);
    const reply = await setStatus(scan.scanId, 'queued');
    expect(reply.json.data.status).toBe('queued');
  });
});
