import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

const logText = async (): Promise<string> => {
  // The log is an append stream; give it a moment to flush.
  await new Promise((resolve) => setTimeout(resolve, 100));
  return readFileSync(join(t.dataDir, 'logs', 'mia.log'), 'utf8');
};

describe('operational log and internal errors', () => {
  it('a 500 carries no stack trace, and its request id finds the log line', async () => {
    const scan = await seedScan(t.server.services.db, { patientId: 'LOG-PHI-77' });
    await seedAnalysis(t.server.services.db, scan, [{}]);
    const writer = (await t.keyFor('radiologist', { scopes: ['write:reports'] })).key;
    const report = (await t.request('POST', '/v1/reports', { key: writer, body: { scan_id: scan.scanId } })).json.data;
    // A damaged row stands in for any unexpected failure deep inside a handler.
    (await t.server.services.db.run(`UPDATE reports SET findings = '{broken' WHERE public_id = ?`, [report.id]));
    const reply = await t.request('GET', `/v1/reports/${report.id}`);
    expect(reply.status).toBe(500);
    expect(reply.json.error).toEqual({ code: 500, title: 'Internal Server Error', message: 'Internal error; quote the request id to support' });
    expect(reply.text).not.toMatch(/\.ts:\d+|at \w+ \(/);
    const lines = (await logText()).trim().split('\n').map((line) => JSON.parse(line) as Record<string, unknown>);
    const entry = lines.find((l) => l['event'] === 'unhandled' && l['request_id'] === reply.json.meta.request_id);
    expect(entry).toMatchObject({ level: 'error', route: 'GET /v1/reports/{id}' });
  });

  it('logs route patterns and ids, never patient ids, query strings or keys', async () => {
    const scan = await seedScan(t.server.services.db, { patientId: 'PHI-PATIENT-4711' });
    await seedAnalysis(t.server.services.db, scan, [{}]);
    await t.request('GET', '/v1/scans?patient_id=PHI-PATIENT-4711');
    await t.request('GET', `/v1/scan/results?patient_id=PHI-PATIENT-4711&format=csv`);
    await t.request('GET', '/v1/auth/me', { key: `mia_${'Z'.repeat(49)}` });
    const text = await logText();
    expect(text).toContain('"route":"GET /v1/scans"');
    expect(text).not.toContain('PHI-PATIENT-4711');
    expect(text).not.toContain('LOG-PHI-77');
    expect(text).not.toContain(t.adminKey);
    expect(text).not.toContain('Z'.repeat(20));
  });
});
