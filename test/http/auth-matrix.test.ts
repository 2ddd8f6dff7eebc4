/**
 * Every route of the table x every kind of caller gets exactly the right 2xx, 401 or 403, as
 * pinned by hand in auth-expectations.ts (not from the route table's own `access`, so a loosened
 * or tightened scope in the server fails here). A route added to the table without a request and
 * a pinned row fails the first test.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Role } from '#common/vocabulary.ts';
import { authenticate } from '#server/auth/authenticate.ts';
import { ROLE_SCOPES } from '#server/auth/scopes.ts';
import { ROUTES } from '#server/http/routes/index.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { routeRequests, type Builder, type Caller } from '../helpers/route-requests.ts';
import { EXPECTED, GRANTS, type Expectation } from './auth-expectations.ts';

let t: TestServer;
let REQUESTS: Record<string, Builder> = {};

const ENTRIES = ROUTES.flatMap((route) => [route.path, ...route.aliases].map((path) => ({ route, name: `${route.method.toUpperCase()} ${path}` })));

const callers: Partial<Record<Role, Caller>> = {};
/** One key per extra grant of GRANTS, in its order. */
const granted: Caller[] = [];
const badKeys: Record<string, string> = {};
/** An admin key rotated a moment ago: it still works, but not for managing keys or users. */
let rotatedAdmin: Caller;

beforeAll(async () => {
  t = await startTestServer({ rateLimit: { requests: 100_000, windowMs: 60_000, authFailures: 100_000 } });
  REQUESTS = await routeRequests(t);
  for (const role of ['radiologist', 'data_engineer', 'admin'] as const) {
    const { key } = await t.keyFor(role, { email: `matrix-${role}@hospital.test` });
    const outcome = await authenticate(t.server.services.db, t.clock, `Bearer ${key}`);
    if (!outcome.ok) throw new Error('fixture key failed');
    callers[role] = { role, key, auth: outcome.auth };
  }
  for (const grant of GRANTS) {
    const { key } = await t.keyFor(grant.role, { email: `matrix-${grant.role}-${grant.scope.replace(':', '-')}@hospital.test`, scopes: [grant.scope] });
    const outcome = await authenticate(t.server.services.db, t.clock, `Bearer ${key}`);
    if (!outcome.ok) throw new Error('granted fixture key failed');
    granted.push({ role: grant.role, key, auth: outcome.auth });
  }
  badKeys['malformed'] = 'mia_this-is-not-a-key';
  const revoked = await t.keyFor('admin', { email: 'revoked@hospital.test' });
  await t.request('DELETE', `/v1/auth/keys/${revoked.keyId}`);
  badKeys['revoked'] = revoked.key;
  const rotated = await t.keyFor('admin', { email: 'rotated@hospital.test' });
  await t.request('POST', `/v1/auth/keys/${rotated.keyId}/rotate`);
  badKeys['rotated and expired'] = rotated.key;
  t.clock.advance(24 * 60 * 60 * 1000 + 1);
  const inGrace = await t.keyFor('admin', { email: 'in-grace@hospital.test' });
  await t.request('POST', `/v1/auth/keys/${inGrace.keyId}/rotate`);
  const outcome = await authenticate(t.server.services.db, t.clock, `Bearer ${inGrace.key}`);
  if (!outcome.ok) throw new Error('key in its grace period failed');
  rotatedAdmin = { role: 'admin', key: inGrace.key, auth: outcome.auth };
});
afterAll(async () => {
  await t.close();
});

describe('auth matrix over the route table', () => {
  it('has a request and a pinned expectation for every route in the table, and no stale entries', () => {
    const names = ENTRIES.map((e) => e.name).sort();
    expect(Object.keys(REQUESTS).sort()).toEqual(names);
    expect(Object.keys(EXPECTED).sort()).toEqual(names);
    for (const grant of GRANTS) for (const name of grant.opens) expect(names).toContain(name);
  });

  const expectReply = (reply: { status: number; text: string; json: any }, allowed: boolean, scope: readonly string[] | null) => {
    if (allowed) {
      // Through authorization: whatever the handler then answers, it is not 401 or 403.
      expect(reply.status, reply.text.slice(0, 300)).toBeGreaterThanOrEqual(200);
      expect(reply.status, reply.text.slice(0, 300)).toBeLessThan(300);
    } else {
      expect(reply.status, reply.text.slice(0, 300)).toBe(403);
      expect(reply.json.error.details).toBe(`required scope: ${(scope ?? []).join(' or ')}`);
    }
  };

  describe.each(ENTRIES)('$name', ({ route, name }) => {
    const builder = (): Builder => {
      const b = REQUESTS[name];
      if (!b) throw new Error(`no request for ${name}`);
      return b;
    };
    const pinned = (): Expectation => {
      const e = EXPECTED[name];
      if (!e) throw new Error(`no pinned expectation for ${name}`);
      return e;
    };

    it.each(['none', 'malformed', 'revoked', 'rotated and expired'])('401 with key: %s', async (kind) => {
      const call = await builder()(callers.admin!);
      const reply = await t.request(route.method.toUpperCase(), call.path, { key: kind === 'none' ? null : badKeys[kind]!, body: call.body, rawBody: call.rawBody, headers: call.headers });
      expect(reply.status).toBe(401);
      expect(reply.json.error.code).toBe(401);
    });

    it.each(['radiologist', 'data_engineer', 'admin'] as const)('role %s with default scopes', async (role) => {
      const caller = callers[role]!;
      const call = await builder()(caller);
      const reply = await t.request(route.method.toUpperCase(), call.path, { key: caller.key, body: call.body, rawBody: call.rawBody, headers: call.headers });
      expectReply(reply, pinned().roles.includes(role), pinned().scope);
    });

    // Only where a grant changes the outcome: a grant that opens nothing here is covered above.
    const grants = GRANTS.map((grant, i) => ({ ...grant, i })).filter((g) => g.opens.includes(name));
    if (grants.length > 0) {
      it.each(grants)('$role key granted $scope', async ({ i }) => {
        const caller = granted[i]!;
        const call = await builder()(caller);
        const reply = await t.request(route.method.toUpperCase(), call.path, { key: caller.key, body: call.body, rawBody: call.rawBody, headers: call.headers });
        expectReply(reply, true, pinned().scope);
      });
    }

    it('admin key in its rotation grace period: refused only where the current key is needed', async () => {
      const call = await builder()(rotatedAdmin);
      const reply = await t.request(route.method.toUpperCase(), call.path, { key: rotatedAdmin.key, body: call.body, rawBody: call.rawBody, headers: call.headers });
      if (!pinned().roles.includes('admin')) {
        // Not the admin's at all (a device's): refused for its scope, as the current key is.
        expectReply(reply, false, pinned().scope);
      } else if (pinned().currentKeyOnly) {
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
