import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CT_SMALL } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedScan } from '../helpers/seed.ts';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

async function userCount(): Promise<number> {
  const reply = await t.request('GET', '/v1/users?limit=500');
  return reply.json.data.items.length;
}

describe('bad input gets the right status, the error envelope, and loses nothing', () => {
  it('malformed JSON body: 400', async () => {
    const before = await userCount();
    const reply = await t.request('POST', '/v1/users', { rawBody: '{"email": "x@y.org", "role": ', headers: { 'Content-Type': 'application/json' } });
    expect(reply.status).toBe(400);
    expect(reply.json.status).toBe('error');
    expect(reply.json.error.message).toMatch(/not valid JSON/);
    expect(await userCount()).toBe(before);
  });

  it('a body missing a field: 400 naming the field', async () => {
    const reply = await t.request('POST', '/v1/users', { body: { email: 'someone@hospital.test' } });
    expect(reply.status).toBe(400);
    expect(reply.json.error.details).toMatch(/^role:/);
  });

  it('an unknown body field: 400 naming it', async () => {
    const reply = await t.request('POST', '/v1/users', { body: { email: 'a@b.org', role: 'admin', admin: true } });
    expect(reply.status).toBe(400);
    expect(reply.json.error.details).toMatch(/admin: unknown field/);
  });

  it('an oversized body: 413', async () => {
    const before = await userCount();
    const reply = await t.request('POST', '/v1/users', { body: { email: 'big@hospital.test', role: 'admin', name: 'x'.repeat(1_100_000) } });
    expect(reply.status).toBe(413);
    expect(reply.json.status).toBe('error');
    expect(reply.json.error.details).toMatch(/1mb/);
    expect(await userCount()).toBe(before);
  });

  it('a body that is not JSON: 415', async () => {
    const reply = await t.request('POST', '/v1/users', { rawBody: 'email=a@b.org', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
    expect(reply.status).toBe(415);
    expect(reply.json.error.details).toMatch(/application\/json/);
  });

  it('an unknown scan status: 400, and the scan keeps its status', async () => {
    const scan = await seedScan(t.server.services.db);
    const reply = await t.request('POST', `/v1/scans/${scan.scanId}`, { body: { status: 'exploded' } });
    expect(reply.status).toBe(400);
    expect(reply.json.error.message).toMatch(/Unknown status/);
    expect(reply.json.error.details).toMatch(/queued, in_review, reviewed, reported, archived/);
    const after = await t.request('GET', `/v1/scans/${scan.scanId}`);
    expect(after.json.data.status).toBe('received');
  });

  it('an unknown format: 406 listing the supported ones, as JSON', async () => {
    const reply = await t.request('GET', '/v1/scan/results?format=pdf');
    expect(reply.status).toBe(406);
    expect(reply.headers.get('content-type')).toMatch(/application\/json/);
    expect(reply.json.error.details).toBe('supported formats: json, csv, xml');
  });

  it('a format the endpoint does not offer: 406', async () => {
    const reply = await t.request('GET', '/v1/scans?format=csv');
    expect(reply.status).toBe(406);
    expect(reply.json.error.details).toBe('supported formats: json');
  });

  it('a foreign Host header (DNS rebinding): 400 before anything else', async () => {
    const reply = await t.request('GET', '/v1/auth/me', { headers: { Host: 'attacker.example:8080' } });
    expect(reply.status).toBe(400);
    expect(reply.json.error.message).toBe('Host header not allowed');
    const loopback = await t.request('GET', '/v1/auth/me', { headers: { Host: `localhost:${new URL(t.url).port}` } });
    expect(loopback.status).toBe(200);
  });

  it('two Host headers, however spelled: 400 (RFC 9112 3.2)', async () => {
    const { port } = new URL(t.url);
    const ask = (head: string): Promise<string> =>
      new Promise((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1', () => socket.write(`GET /v1/auth/me HTTP/1.1\r\n${head}Authorization: Bearer ${t.adminKey}\r\nConnection: close\r\n\r\n`));
        let answer = '';
        socket.on('data', (chunk: Buffer) => (answer += chunk.toString()));
        socket.on('end', () => resolve(answer));
        socket.on('error', reject);
      });
    expect(await ask('Host: 127.0.0.1\r\nHOST: attacker.example\r\n')).toMatch(/^HTTP\/1\.1 400 [\s\S]*More than one Host header/);
    expect(await ask('Host: 127.0.0.1\r\n')).toMatch(/^HTTP\/1\.1 200 /);
  });

  it('a gzip body that does not inflate: 400, not a server error', async () => {
    const before = await userCount();
    const reply = await t.request('POST', '/v1/users', {
      rawBody: JSON.stringify({ email: 'gz@hospital.test', role: 'radiologist' }),
      headers: { 'Content-Type': 'application/json', 'Content-Encoding': 'gzip' },
    });
    expect(reply.status).toBe(400);
    expect(reply.json).toMatchObject({ status: 'error', error: { code: 400, details: expect.stringMatching(/^body:/) } });
    expect(await userCount()).toBe(before);
  });

  it('an unknown query parameter: 400 naming it', async () => {
    const reply = await t.request('GET', '/v1/scans?modalty=MR');
    expect(reply.status).toBe(400);
    expect(reply.json.error.details).toMatch(/modalty: unknown parameter/);
  });

  it('a NUL character anywhere (path, query, body): 400 naming where, on SQLite and PostgreSQL alike', async () => {
    const path = await t.request('GET', '/v1/users/usr%00x');
    expect(path.status).toBe(400);
    expect(path.json.error.details).toBe('id: contains a NUL character (U+0000)');
    const query = await t.request('GET', '/v1/scans?patient_id=P%00');
    expect(query.status).toBe(400);
    expect(query.json.error.details).toBe('patient_id: contains a NUL character (U+0000)');
    const before = (await t.request('GET', '/v1/users')).json.data.items.length;
    const body = await t.request('POST', '/v1/users', { body: { email: 'nul@hospital.test', role: 'radiologist', name: 'A\u0000B' } });
    expect(body.status).toBe(400);
    expect(body.json.error.details).toBe('name: contains a NUL character (U+0000)');
    expect((await t.request('GET', '/v1/users')).json.data.items).toHaveLength(before);
  });

  it('a DICOM file with a NUL inside a text value imports on both backends, the NUL shown as U+FFFD', async () => {
    // PostgreSQL cannot store U+0000 in text: on a hub this one file failed its whole import job.
    const bytes = readFileSync(CT_SMALL);
    const name = Buffer.from('CompressedSamples^CT1', 'latin1');
    const at = bytes.indexOf(name);
    expect(at).toBeGreaterThan(0);
    bytes[at + 'Compressed'.length] = 0;
    const dir = mkdtempSync(join(tmpdir(), 'mia-nul-'));
    writeFileSync(join(dir, 'nul.dcm'), bytes);
    const started = await t.request('POST', '/v1/imports', { body: { path: dir } });
    expect(started.status, started.text).toBe(202);
    const job = async () => (await t.request('GET', `/v1/imports/${started.json.data.id}`)).json.data;
    await expect.poll(async () => (await job()).status, { timeout: 20_000 }).not.toBe('running');
    expect(await job()).toMatchObject({ status: 'completed', error: null, counts: { imported: 1, rejected: 0 } });
    const studies = (await t.request('GET', '/v1/studies?limit=500')).json.data.items as { patient_name: string | null }[];
    expect(studies.map((s) => s.patient_name)).toContain('Compressed\uFFFDamples^CT1');
  });
});

describe('CORS', () => {
  it('never answers with a wildcard or a foreign origin', async () => {
    const reply = await t.request('GET', '/v1/auth/me', { headers: { Origin: 'https://evil.example' } });
    expect(reply.headers.get('access-control-allow-origin')).toBeNull();
  });
});

describe('rate limiting', () => {
  it('answers 429 with Retry-After once a key spends its budget, other keys unaffected', async () => {
    const limited = await startTestServer({ rateLimit: { requests: 5, windowMs: 60_000, authFailures: 3 } });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i += 1) statuses.push((await limited.request('GET', '/v1/auth/me')).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
      // The same key spelled differently (scheme case, extra spaces) is the same budget.
      for (const header of [`bearer ${limited.adminKey}`, `Bearer    ${limited.adminKey}`, `BEARER ${limited.adminKey} `]) {
        expect((await limited.request('GET', '/v1/auth/me', { key: null, headers: { Authorization: header } })).status).toBe(429);
      }
      const refused = await limited.request('GET', '/v1/auth/me');
      expect(refused.json.error.code).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      const other = (await limited.keyFor('radiologist')).key;
      expect((await limited.request('GET', '/v1/auth/me', { key: other })).status).toBe(200);
      limited.clock.advance(60_000);
      expect((await limited.request('GET', '/v1/auth/me')).status).toBe(200);
    } finally {
      await limited.close();
    }
  });

  it('slows down guessing: after repeated bad keys an address gets 429', async () => {
    const limited = await startTestServer({ rateLimit: { requests: 100, windowMs: 60_000, authFailures: 3 } });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 4; i += 1) {
        statuses.push((await limited.request('GET', '/v1/auth/me', { key: `mia_${'x'.repeat(49)}` })).status);
      }
      expect(statuses).toEqual([401, 401, 401, 429]);
      // A refusal of a bodiless request keeps the connection (clients need not reconnect).
      const refused = await limited.request('GET', '/v1/auth/me', { key: `mia_${'x'.repeat(49)}` });
      expect(refused.status).toBe(429);
      expect(refused.headers.get('connection')).not.toBe('close');
      // A valid key from the same address is not locked out by someone else's bad ones.
      expect((await limited.request('GET', '/v1/auth/me')).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});
