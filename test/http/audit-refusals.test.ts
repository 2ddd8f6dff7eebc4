/**
 * Refused and throttled requests are audited in bounded form (issue 10, defect 4): one counted
 * event per address, action, outcome, route and minute, however many requests arrive.
 */
import { Agent, request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const WRONG_KEY = `mia_${'A'.repeat(49)}`;

type Event = { id: number; action: string; outcome: string; status_code: number; address: string | null; count: number; target: string | null; at: string };

/** `count` requests over a few keep-alive connections; the statuses seen, tallied. */
async function flood(url: string, count: number, headers: Record<string, string>): Promise<Map<number, number>> {
  const agent = new Agent({ keepAlive: true, maxSockets: 4 });
  const statuses = new Map<number, number>();
  let sent = 0;
  const worker = async (): Promise<void> => {
    while (sent < count) {
      sent += 1;
      const status = await new Promise<number>((resolve, reject) => {
        const req = request(`${url}/v1/auth/me`, { agent, headers }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end();
      });
      statuses.set(status, (statuses.get(status) ?? 0) + 1);
    }
  };
  try {
    await Promise.all([worker(), worker(), worker(), worker()]);
  } finally {
    agent.destroy();
  }
  return statuses;
}

let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

async function auditRows(server: TestServer): Promise<number> {
  return ((await server.server.services.db.get('SELECT count(*) AS n FROM audit_events')) as { n: number }).n;
}

describe('refused requests in the audit trail', () => {
  it('3,000 wrong-key requests in one minute are two counted events; the first shows at once', { timeout: 120_000 }, async () => {
    const server = await startTestServer({ rateLimit: { requests: 30_000, windowMs: 60_000, authFailures: 60 } });
    t = server;
    const auditor = (await server.keyFor('radiologist', { email: 'auditor@hospital.test', scopes: ['read:audit'] })).key;
    const failures = async (): Promise<Event[]> =>
      (await server.request('GET', '/v1/audit?action=auth.failure&limit=100', { key: auditor })).json.data.items as Event[];

    expect((await server.request('GET', '/v1/auth/me', { key: WRONG_KEY })).status).toBe(401);
    const first = await failures();
    expect(first).toHaveLength(1);
    expect(first[0]).toMatchObject({ action: 'auth.failure', status_code: 401, count: 1, target: 'GET /v1/auth/me', address: expect.stringMatching(/127\.0\.0\.1$/) });

    const before = await auditRows(server);
    const statuses = await flood(server.url, 2_999, { Authorization: `Bearer ${WRONG_KEY}` });
    // 60 failures a minute are answered 401, the rest are slowed down with 429.
    expect(Object.fromEntries(statuses)).toEqual({ 401: 59, 429: 2_940 });

    const events = await failures();
    expect(events.map((e) => [e.status_code, e.count])).toEqual([[401, 60], [429, 2_940]]);
    expect(events.reduce((sum, e) => sum + e.count, 0)).toBe(3_000);
    // The flood itself added one row (the 429s); the rest are the audit reads above.
    expect(await auditRows(server) - before).toBeLessThanOrEqual(3);
    // Nothing else the flood did made a row: no key, no user, one address.
    expect(new Set(events.map((e) => e.address)).size).toBe(1);

    // A new minute starts a new counted event.
    server.clock.advance(60_000);
    expect((await server.request('GET', '/v1/auth/me', { key: WRONG_KEY })).status).toBe(401);
    const later = await failures();
    expect(later).toHaveLength(3);
    expect(later.at(-1)).toMatchObject({ status_code: 401, count: 1, at: server.clock.now().toISOString() });
  });

  it('requests over the rate limit are one counted requests.throttled event per address and minute', async () => {
    const server = await startTestServer({ rateLimit: { requests: 5, windowMs: 60_000, authFailures: 3 } });
    t = server;
    const auditor = (await server.keyFor('radiologist', { email: 'auditor@hospital.test', scopes: ['read:audit'] })).key;
    const statuses = await flood(server.url, 205, { Authorization: `Bearer ${server.adminKey}` });
    expect(Object.fromEntries(statuses)).toEqual({ 200: 5, 429: 200 });
    const events = (await server.request('GET', '/v1/audit?action=requests.throttled', { key: auditor })).json.data.items as Event[];
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ outcome: 'rate_limited', status_code: 429, count: 200, address: expect.stringMatching(/127\.0\.0\.1$/) });
  });
});
