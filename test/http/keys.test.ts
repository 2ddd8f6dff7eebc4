import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const DAY = 24 * 60 * 60 * 1000;

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

describe('API keys', () => {
  it('creates a key shown once, recognisable, then listed without the secret', async () => {
    const created = await t.request('POST', '/v1/auth/keys', { body: { name: 'pacs bridge' } });
    expect(created.status).toBe(201);
    const { api_key: record, key } = created.json.data;
    expect(key).toMatch(/^mia_[0-9A-Za-z]{49}$/);
    expect(record).toMatchObject({ name: 'pacs bridge', status: 'active', scopes: ['*'], prefix: key.slice(0, 10) });
    const list = await t.request('GET', '/v1/auth/keys?limit=500');
    expect(list.text).not.toContain(key);
    expect(list.json.data.items.map((k: { id: string }) => k.id)).toContain(record.id);
    expect((await t.request('GET', '/v1/auth/me', { key })).status).toBe(200);
  });

  it('rejects a key with a broken checksum without a lookup, and says so', async () => {
    const { key } = await t.keyFor('radiologist');
    const typo = key.slice(0, 20) + (key[20] === 'a' ? 'b' : 'a') + key.slice(21);
    const reply = await t.request('GET', '/v1/auth/me', { key: typo });
    expect(reply.status).toBe(401);
    expect(reply.json.error.details).toBe('malformed API key (checksum mismatch)');
  });

  it('rotation: the new key works at once, the old one for 24 hours, then 401', async () => {
    const { key: old, keyId } = await t.keyFor('radiologist', { email: 'rotating@hospital.test' });
    const rotated = await t.request('POST', `/v1/auth/keys/${keyId}/rotate`, { key: old });
    expect(rotated.status).toBe(201);
    const fresh = rotated.json.data.key as string;
    expect(rotated.json.data.previous).toEqual({ id: keyId, expires_at: new Date(t.clock.now().getTime() + DAY).toISOString() });
    expect((await t.request('GET', '/v1/auth/me', { key: fresh })).status).toBe(200);
    expect((await t.request('GET', '/v1/auth/me', { key: old })).status).toBe(200);
    t.clock.advance(DAY - 1000);
    expect((await t.request('GET', '/v1/auth/me', { key: old })).status).toBe(200);
    t.clock.advance(1000);
    const expired = await t.request('GET', '/v1/auth/me', { key: old });
    expect(expired.status).toBe(401);
    expect(expired.json.error.details).toMatch(/rotated/);
    expect((await t.request('GET', '/v1/auth/me', { key: fresh })).status).toBe(200);
    const again = await t.request('POST', `/v1/auth/keys/${keyId}/rotate`, { key: fresh });
    expect(again.status).toBe(409);
  });

  it('revocation is immediate', async () => {
    const { key, keyId } = await t.keyFor('data_engineer');
    expect((await t.request('GET', '/v1/auth/me', { key })).status).toBe(200);
    const revoked = await t.request('DELETE', `/v1/auth/keys/${keyId}`);
    expect(revoked.json.data.status).toBe('revoked');
    const reply = await t.request('GET', '/v1/auth/me', { key });
    expect(reply.status).toBe(401);
    expect(reply.json.error.details).toBe('API key was revoked');
  });

  it("a user manages only their own keys; others' are 404, granting scopes is 403", async () => {
    const alice = await t.keyFor('radiologist', { email: 'alice@hospital.test' });
    const bob = await t.keyFor('radiologist', { email: 'bob@hospital.test' });
    expect((await t.request('DELETE', `/v1/auth/keys/${bob.keyId}`, { key: alice.key })).status).toBe(404);
    expect((await t.request('POST', `/v1/auth/keys/${bob.keyId}/rotate`, { key: alice.key })).status).toBe(404);
    const own = await t.request('GET', '/v1/auth/keys', { key: alice.key });
    expect(own.json.data.items.every((k: { user_id: string }) => k.user_id === alice.userId)).toBe(true);
    const grant = await t.request('POST', '/v1/auth/keys', { key: alice.key, body: { scopes: ['write:scans'] } });
    expect(grant.status).toBe(403);
    expect(grant.json.error.details).toBe('required scope: manage:users');
    const forBob = await t.request('POST', '/v1/auth/keys', { key: alice.key, body: { user_id: bob.userId } });
    expect(forBob.status).toBe(403);
  });

  it('an admin grants extra scopes to another user\'s key, and /auth/me reports them', async () => {
    const carol = await t.keyFor('radiologist', { email: 'carol@hospital.test' });
    const created = await t.request('POST', '/v1/auth/keys', { body: { user_id: carol.userId, scopes: ['write:reports'] } });
    expect(created.status).toBe(201);
    const me = await t.request('GET', '/v1/auth/me', { key: created.json.data.key });
    expect(me.json.data.user.scopes).toEqual(['read:scans', 'read:reports', 'write:reports']);
  });

  it('disabling a user stops all their keys; the last admin cannot be demoted', async () => {
    const dave = await t.keyFor('data_engineer', { email: 'dave@hospital.test' });
    const disabled = await t.request('PATCH', `/v1/users/${dave.userId}`, { body: { status: 'disabled' } });
    expect(disabled.json.data.status).toBe('disabled');
    expect((await t.request('GET', '/v1/auth/me', { key: dave.key })).status).toBe(401);
    const me = (await t.request('GET', '/v1/auth/me')).json.data.user;
    const demote = await t.request('PATCH', `/v1/users/${me.id}`, { body: { role: 'radiologist' } });
    expect(demote.status).toBe(409);
    expect((await t.request('GET', '/v1/auth/me')).json.data.user.role).toBe('admin');
  });

  it('users: create, duplicate email 409, read, list by role', async () => {
    const created = await t.request('POST', '/v1/users', { body: { email: 'erin@hospital.test', role: 'data_engineer', name: 'Erin' } });
    expect(created.status).toBe(201);
    expect((await t.request('POST', '/v1/users', { body: { email: 'ERIN@hospital.test', role: 'admin' } })).status).toBe(409);
    expect((await t.request('GET', `/v1/users/${created.json.data.id}`)).json.data.email).toBe('erin@hospital.test');
    const engineers = await t.request('GET', '/v1/users?role=data_engineer');
    expect(engineers.json.data.items.every((u: { role: string }) => u.role === 'data_engineer')).toBe(true);
    expect((await t.request('GET', '/v1/users/usr_unknown')).status).toBe(404);
  });

  it('accepts intranet and international addresses, refuses what is not one', async () => {
    for (const email of ['dr.lee@radiology', 'admin@localhost', 'müller@klinik.example']) {
      expect((await t.request('POST', '/v1/users', { body: { email, role: 'radiologist' } })).status, email).toBe(201);
    }
    for (const email of ['no-at-sign', 'two@@example.org', 'space in@example.org', '@example.org', 'x@.example']) {
      const reply = await t.request('POST', '/v1/users', { body: { email, role: 'radiologist' } });
      expect(reply.status, email).toBe(400);
      expect(reply.json.error.details).toMatch(/^email: /);
    }
  });
});
