/**
 * Every route of the table x every kind of caller gets exactly the right 2xx, 401 or 403.
 * The request map below must name every route: a route added to the table without an entry
 * here fails the first test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Role } from '#common/vocabulary.ts';
import { authenticate } from '#server/auth/authenticate.ts';
import { ROLE_SCOPES, holdsAnyScope } from '#server/auth/scopes.ts';
import { ROUTES } from '#server/http/routes/index.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { routeRequests, type Builder, type Caller } from '../helpers/route-requests.ts';

let t: TestServer;
let REQUESTS: Record<string, Builder> = {};

const ENTRIES = ROUTES.flatMap((route) => [route.path, ...route.aliases].map((path) => ({ route, name: `${route.method.toUpperCase()} ${path}` })));

const callers: Partial<Record<Role, Caller>> = {};
const badKeys: Record<string, string> = {};
/** An admin key rotated a moment ago: it still works, but not for managing keys or users. */
let rotatedAdmin: Caller;

beforeAll(async () => {
  t = await startTestServer({ rateLimit: { requests: 100_000, windowMs: 60_000, authFailures: 100_000 } });
  REQUESTS = routeRequests(t);
  for (const role of ['radiologist', 'data_engineer', 'admin'] as const) {
    const { key } = t.keyFor(role, { email: `matrix-${role}@hospital.test` });
    const outcome = authenticate(t.server.services.db, t.clock, `Bearer ${key}`);
    if (!outcome.ok) throw new Error('fixture key failed');
    callers[role] = { role, key, auth: outcome.auth };
  }
  badKeys['malformed'] = 'mia_this-is-not-a-key';
  const revoked = t.keyFor('admin', { email: 'revoked@hospital.test' });
  await t.request('DELETE', `/v1/auth/keys/${revoked.keyId}`);
  badKeys['revoked'] = revoked.key;
  const rotated = t.keyFor('admin', { email: 'rotated@hospital.test' });
  await t.request('POST', `/v1/auth/keys/${rotated.keyId}/rotate`);
  badKeys['rotated and expired'] = rotated.key;
  t.clock.advance(24 * 60 * 60 * 1000 + 1);
  const inGrace = t.keyFor('admin', { email: 'in-grace@hospital.test' });
  await t.request('POST', `/v1/auth/keys/${inGrace.keyId}/rotate`);
  const outcome = authenticate(t.server.services.db, t.clock, `Bearer ${inGrace.key}`);
  if (!outcome.ok) throw new Error('key in its grace period failed');
  rotatedAdmin = { role: 'admin', key: inGrace.key, auth: outcome.auth };
});
afterAll(async () => {
  await t.close();
});

describe('auth matrix over the route table', () => {
  it('has a request for every route in the table, and no stale entries', () => {
    const names = ENTRIES.map((e) => e.name).sort();
    expect(Object.keys(REQUESTS).sort()).toEqual(names);
  });

  describe.each(ENTRIES)('$name', ({ route, name }) => {
    const builder = (): Builder => {
      const b = REQUESTS[name];
      if (!b) throw new Error(`no request for ${name}`);
      return b;
    };

    it.each(['none', 'malformed', 'revoked', 'rotated and expired'])('401 with key: %s', async (kind) => {
      const call = builder()(callers.admin!);
      const reply = await t.request(route.method.toUpperCase(), call.path, { key: kind === 'none' ? null : badKeys[kind]!, body: call.body, rawBody: call.rawBody, headers: call.headers });
      expect(reply.status).toBe(401);
      expect(reply.json.error.code).toBe(401);
    });

    it.each(['radiologist', 'data_engineer', 'admin'] as const)('role %s with default scopes', async (role) => {
      const caller = callers[role]!;
      const allowed = route.access.kind === 'authenticated' || holdsAnyScope(ROLE_SCOPES[role], route.access.anyOf);
      const call = builder()(caller);
      const reply = await t.request(route.method.toUpperCase(), call.path, { key: caller.key, body: call.body, rawBody: call.rawBody, headers: call.headers });
      if (allowed) {
        expect(reply.status, reply.text.slice(0, 300)).toBeGreaterThanOrEqual(200);
        expect(reply.status, reply.text.slice(0, 300)).toBeLessThan(300);
      } else {
        expect(reply.status).toBe(403);
        expect(reply.json.error.details).toMatch(/^required scope: /);
      }
    });

    it(`admin key in its rotation grace period: ${route.currentKeyOnly ? '403' : 'allowed'}`, async () => {
      const call = builder()(rotatedAdmin);
      const reply = await t.request(route.method.toUpperCase(), call.path, { key: rotatedAdmin.key, body: call.body, rawBody: call.rawBody, headers: call.headers });
      if (route.currentKeyOnly) {
        expect(reply.status).toBe(403);
        expect(reply.json.error.details).toMatch(/rotated and is in its grace period/);
      } else {
        expect(reply.status, reply.text.slice(0, 300)).toBeGreaterThanOrEqual(200);
        expect(reply.status, reply.text.slice(0, 300)).toBeLessThan(300);
      }
    });
  });

  it('gives each role the default scopes of PRODUCT.md (Access): the radiologist reviews and reports', () => {
    // Pinned here because the matrix above derives its expectations from ROLE_SCOPES itself.
    expect(ROLE_SCOPES).toEqual({ radiologist: ['read:scans', 'read:reports', 'write:reports'], data_engineer: ['read:scans', 'write:exports'], admin: ['*'] });
    expect(callers.radiologist!.auth.scopes).toEqual(['read:scans', 'read:reports', 'write:reports']);
  });

  it('checks the scope before looking up the target: 403 even for a scan that does not exist', async () => {
    const reply = await t.request('POST', '/v1/scans/1.2.3.4', { key: callers.radiologist!.key, body: { status: 'archived' } });
    expect(reply.status).toBe(403);
  });
});
