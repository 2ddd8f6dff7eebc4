/**
 * Hardening of the HTTP edge (issue 10, defect 7): duplicate Host headers, numeric query
 * parameters spelled other than in decimal digits, and nosniff on every response.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { rawRequest } from '../helpers/raw-http.ts';
import { seedScan } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let uiDir: string;
beforeAll(async () => {
  uiDir = mkdtempSync(join(tmpdir(), 'mia-ui-'));
  writeFileSync(join(uiDir, 'index.html'), '<!doctype html><title>mia</title>');
  writeFileSync(join(uiDir, 'app.js'), 'console.log(1);');
  t = await startTestServer({ uiDir });
});
afterAll(async () => {
  await t.close();
  rmSync(uiDir, { recursive: true, force: true });
});

describe('Host header', () => {
  const port = (): string => new URL(t.url).port;

  it('two Host headers, the good one first: 400, however they are spelled', async () => {
    for (const [first, second] of [
      [`127.0.0.1:${port()}`, 'evil.example'],
      [`127.0.0.1:${port()}`, `127.0.0.1:${port()}`],
      ['evil.example', `127.0.0.1:${port()}`],
    ]) {
      const reply = await rawRequest(t.url, `GET /v1/auth/me HTTP/1.1\r\nHost: ${first}\r\nhost: ${second}\r\nAuthorization: Bearer ${t.adminKey}`);
      expect(reply.status, `${first} then ${second}`).toBe(400);
      expect(reply.text).toContain('Host: send exactly one Host header');
      expect(reply.text).not.toContain('admin@hospital.test');
    }
  });

  it('one good Host header over the same raw path: 200', async () => {
    const reply = await rawRequest(t.url, `GET /v1/auth/me HTTP/1.1\r\nHost: 127.0.0.1:${port()}\r\nAuthorization: Bearer ${t.adminKey}`);
    expect(reply.status).toBe(200);
  });
});

describe('numeric query parameters take decimal digits only', () => {
  const notDecimal = ['0x10', '0X10', '1e1', '%2016', '16%20', '', '%2B16', '16.0', '0b10', '0o10', 'Infinity', '%EF%BC%91%EF%BC%96', '-1'];

  it.each([
    ['/v1/scans'],
    ['/v1/users'],
    ['/v1/auth/keys'],
    ['/v1/imports'],
    ['/v1/audit'],
    ['/v1/exports'],
    ['/v1/reports'],
    ['/v1/scan/results'],
  ])('%s?limit=...: 400 naming limit', async (path) => {
    for (const value of notDecimal) {
      const reply = await t.request('GET', `${path}?limit=${value}`);
      expect(reply.status, `limit=${value}`).toBe(400);
      expect(reply.json.error.details, `limit=${value}`).toMatch(/^limit: /);
    }
    expect((await t.request('GET', `${path}?limit=16`)).status).toBe(200);
    expect((await t.request('GET', `${path}?limit=016`)).status).toBe(200);
  });

  it('limit=0x10 is not read as 16 on a list with more than 16 items', async () => {
    for (let i = 0; i < 20; i += 1) await seedScan(t.server.services.db);
    expect((await t.request('GET', '/v1/scans?limit=0x10')).status).toBe(400);
    expect((await t.request('GET', '/v1/scans?limit=16')).json.data.items).toHaveLength(16);
  });

  it('instances of a scan: limit 400 on 0x10, and the frame and window numbers stay strict', async () => {
    const { scanId, instanceUid } = await seedImportedInstance(t);
    const hex = await t.request('GET', `/v1/scans/${scanId}/instances?limit=0x10`);
    expect(hex.status).toBe(400);
    expect(hex.json.error.details).toMatch(/^limit: /);
    expect((await t.request('GET', `/v1/scans/${scanId}/instances?limit=16`)).status).toBe(200);
    const frame = await t.request('GET', `/v1/instances/${instanceUid}/frames/0x0/rendered`, { headers: { Accept: 'image/png' } });
    expect(frame.status).toBe(400);
    const window = await t.request('GET', `/v1/instances/${instanceUid}/frames/0/rendered?window_center=0x10&window_width=400`, { headers: { Accept: 'image/png' } });
    expect(window.status).toBe(400);
    expect(window.json.error.details).toMatch(/^window_center: /);
  });

  it('min_confidence: decimals only', async () => {
    for (const value of ['0x1', '1e-1', '%200.5', '.5']) {
      const reply = await t.request('GET', `/v1/scan/results?min_confidence=${value}`);
      expect(reply.status, value).toBe(400);
      expect(reply.json.error.details).toMatch(/^min_confidence: /);
    }
    expect((await t.request('GET', '/v1/scan/results?min_confidence=0.5')).status).toBe(200);
  });
});

describe('X-Content-Type-Options: nosniff on every response', () => {
  it.each([
    ['API data', '/v1/auth/me', {}, 200],
    ['list as CSV', '/v1/scan/results?format=csv', {}, 200],
    ['401', '/v1/auth/me', { key: null }, 401],
    ['404 API path', '/v1/nothing-here', {}, 404],
    ['400 foreign Host', '/v1/auth/me', { headers: { Host: 'evil.example' } }, 400],
    ['406', '/v1/scans?format=pdf', {}, 406],
    ['UI page', '/', { key: null }, 200],
    ['UI file', '/app.js', { key: null }, 200],
    ['OpenAPI', '/v1/openapi.json', {}, 200],
  ] as const)('%s', async (_name, path, options, status) => {
    const reply = await t.request('GET', path, options);
    expect(reply.status).toBe(status);
    expect(reply.headers.get('x-content-type-options')).toBe('nosniff');
  });

  it('rate-limited, rendered image and upload refusals too', async () => {
    const limited = await startTestServer({ rateLimit: { requests: 1, windowMs: 60_000, authFailures: 1 } });
    try {
      await limited.request('GET', '/v1/auth/me');
      const reply = await limited.request('GET', '/v1/auth/me');
      expect(reply.status).toBe(429);
      expect(reply.headers.get('x-content-type-options')).toBe('nosniff');
    } finally {
      await limited.close();
    }
    const { instanceUid } = await seedImportedInstance(t);
    const png = await t.request('GET', `/v1/instances/${instanceUid}/frames/0/rendered`, { headers: { Accept: 'image/png' } });
    expect(png.status).toBe(200);
    expect(png.headers.get('x-content-type-options')).toBe('nosniff');
    const refused = await t.request('POST', '/v1/instances', { rawBody: 'not dicom', headers: { 'Content-Type': 'text/html' } });
    expect(refused.status).toBe(415);
    expect(refused.headers.get('x-content-type-options')).toBe('nosniff');
  });
});
