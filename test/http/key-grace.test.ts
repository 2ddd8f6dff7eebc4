/**
 * A rotated key keeps working for its 24-hour grace period (spec 5.3) so integrations can switch
 * over, but it may not manage keys or users: otherwise a leaked old key could mint itself a
 * successor that outlives the rotation (issue 10, defect 5).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

describe('a rotated key in its grace period', () => {
  it('still reads, but may not create, rotate or revoke keys, nor create or change users', async () => {
    const admin = await t.keyFor('admin', { email: 'rotated-admin@hospital.test' });
    const other = await t.keyFor('radiologist', { email: 'rotation-bystander@hospital.test' });
    const rotated = await t.request('POST', `/v1/auth/keys/${admin.keyId}/rotate`, { key: admin.key });
    expect(rotated.status).toBe(201);
    const fresh = { key: rotated.json.data.key as string, keyId: rotated.json.data.api_key.id as string };
    const old = admin.key;
    const keyCount = async (): Promise<number> => ((await t.server.services.db.get('SELECT COUNT(*) AS n FROM api_keys')) as { n: number }).n;
    const userCount = async (): Promise<number> => ((await t.server.services.db.get('SELECT COUNT(*) AS n FROM users')) as { n: number }).n;
    const keysBefore = await keyCount();
    const usersBefore = await userCount();

    const attempts: [string, string, unknown][] = [
      ['POST', '/v1/auth/keys', { name: 'successor' }],
      ['POST', '/v1/auth/keys', { user_id: other.userId, name: 'for someone else' }],
      ['POST', `/v1/auth/keys/${fresh.keyId}/rotate`, undefined],
      ['POST', `/v1/auth/keys/${other.keyId}/rotate`, undefined],
      ['DELETE', `/v1/auth/keys/${fresh.keyId}`, undefined],
      ['DELETE', `/v1/auth/keys/${other.keyId}`, undefined],
      ['POST', '/v1/users', { email: 'minted@hospital.test', role: 'admin' }],
      ['PATCH', `/v1/users/${other.userId}`, { role: 'admin' }],
    ];
    for (const [method, path, body] of attempts) {
      const reply = await t.request(method, path, { key: old, body });
      expect(reply.status, `${method} ${path}`).toBe(403);
      expect(reply.json.error.details).toBe('this key was rotated and is in its grace period; use the new key to manage keys and users');
    }
    expect(await keyCount()).toBe(keysBefore);
    expect(await userCount()).toBe(usersBefore);
    expect((await t.request('GET', '/v1/auth/me', { key: fresh.key })).status).toBe(200);
    expect((await t.request('GET', '/v1/auth/me', { key: other.key })).json.data.user.role).toBe('radiologist');

    for (const path of ['/v1/auth/me', '/v1/auth/keys', '/v1/users', `/v1/users/${other.userId}`, '/v1/scans']) {
      expect((await t.request('GET', path, { key: old })).status, path).toBe(200);
    }
    const denied = await t.request('GET', `/v1/audit?action=keys.create&limit=500`, { key: fresh.key });
    expect(denied.json.data.items.filter((e: { key_id: string; outcome: string }) => e.key_id === admin.keyId && e.outcome === 'denied')).toHaveLength(2);
    // The new key manages as before.
    expect((await t.request('POST', '/v1/auth/keys', { key: fresh.key, body: { name: 'successor' } })).status).toBe(201);
  });
});
