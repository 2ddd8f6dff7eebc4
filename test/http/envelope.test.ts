import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type Reply, type TestServer } from '../helpers/server.ts';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

function expectEnvelope(reply: Reply, status: 'success' | 'error', version = 'v1'): void {
  expect(reply.headers.get('content-type')).toMatch(/^application\/json/);
  expect(reply.json.status).toBe(status);
  expect(new Date(reply.json.timestamp).toISOString()).toBe(reply.json.timestamp);
  expect(reply.json.meta.request_id).toMatch(UUID);
  expect(reply.headers.get('x-request-id')).toBe(reply.json.meta.request_id);
  expect(reply.json.meta.version).toBe(version);
  if (status === 'success') {
    expect(reply.json).toHaveProperty('data');
    expect(reply.json).not.toHaveProperty('error');
  } else {
    expect(reply.json).not.toHaveProperty('data');
    expect(reply.json.error.code).toBe(reply.status);
    expect(typeof reply.json.error.message).toBe('string');
  }
}

describe('response envelope (spec 2.1, 2.2, 7.1)', () => {
  it('wraps success with data and meta, and gives each call its own request id', async () => {
    const first = await t.request('GET', '/v1/auth/me');
    const second = await t.request('GET', '/v1/auth/me');
    expect(first.status).toBe(200);
    expectEnvelope(first, 'success');
    expect(first.json.data.user).toMatchObject({ email: 'admin@hospital.test', role: 'admin', scopes: ['*'] });
    expect(Object.keys(first.json.data)).toEqual(['user']);
    expect(Object.keys(first.json.data.user).sort()).toEqual(['email', 'id', 'role', 'scopes']);
    expect(second.json.meta.request_id).not.toBe(first.json.meta.request_id);
  });

  it.each([
    ['401', 'GET', '/v1/auth/me', null, 401],
    ['404 for an unknown scan', 'GET', '/v1/scans/1.2.3', undefined, 404],
    ['404 for an unknown path', 'GET', '/v1/nothing-here', undefined, 404],
    ['400 for a bad query', 'GET', '/v1/scans?limit=9999', undefined, 400],
  ] as const)('wraps errors: %s', async (_name, method, path, key, status) => {
    const reply = await t.request(method, path, key === undefined ? {} : { key });
    expect(reply.status).toBe(status);
    expectEnvelope(reply, 'error');
    expect(reply.text).not.toMatch(/at .*\.ts:\d+/);
  });

  it('401 and 403 bodies carry the titles and texts of spec 7.2', async () => {
    const unauthorized = await t.request('GET', '/v1/scans', { key: null });
    expect(unauthorized.json.error).toMatchObject({ code: 401, title: 'Unauthorized' });
    expect(unauthorized.json.error.message).toMatch(/API key is missing or invalid/);
    const radiologist = (await t.keyFor('radiologist')).key;
    const forbidden = await t.request('POST', '/v1/scans/1.2.3', { key: radiologist, body: { status: 'archived' } });
    expect(forbidden.status).toBe(403);
    expect(forbidden.json.error).toMatchObject({ code: 403, title: 'Forbidden', details: 'required scope: write:scans' });
    expect(forbidden.json.error.message).toMatch(/no permission/i);
  });
});

describe('API versions (spec 9)', () => {
  it('echoes v1.1 when asked with API-Version: 1.1', async () => {
    const reply = await t.request('GET', '/v1/auth/me', { headers: { 'API-Version': '1.1' } });
    expectEnvelope(reply, 'success', 'v1.1');
  });

  it('refuses an unknown version with 400 naming the header', async () => {
    const reply = await t.request('GET', '/v1/auth/me', { headers: { 'API-Version': '2' } });
    expect(reply.status).toBe(400);
    expectEnvelope(reply, 'error');
    expect(reply.json.error.details).toMatch(/API-Version/);
  });
});
