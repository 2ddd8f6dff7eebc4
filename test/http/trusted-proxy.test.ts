/**
 * A hub behind its reverse proxy (docs/hub.md): with the proxy named (trustedProxies), a client is
 * known by the address the proxy forwarded, so one client's failed keys slow that client alone and
 * the audit trail names it; without it, X-Forwarded-For is anyone's claim and is ignored.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const WRONG_KEY = `mia_${'A'.repeat(49)}`;

let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

async function failureAddresses(server: TestServer): Promise<(string | null)[]> {
  const auditor = (await server.keyFor('radiologist', { email: 'auditor@hospital.test', scopes: ['read:audit'] })).key;
  const events = (await server.request('GET', '/v1/audit?action=auth.failure&limit=100', { key: auditor })).json.data.items as { address: string | null }[];
  return events.map((e) => e.address);
}

describe('client addresses behind a reverse proxy', () => {
  it('a trusted proxy forwards each client: failures throttle and are audited per client', async () => {
    const server = await startTestServer({ trustedProxies: ['127.0.0.1'], rateLimit: { requests: 30_000, windowMs: 60_000, authFailures: 5 } });
    t = server;
    const from = (client: string) => server.request('GET', '/v1/auth/me', { key: WRONG_KEY, headers: { 'X-Forwarded-For': client } });
    const guesser: number[] = [];
    for (let i = 0; i < 7; i++) guesser.push((await from('10.1.2.3')).status);
    expect(guesser.slice(0, 5)).toEqual([401, 401, 401, 401, 401]);
    expect(guesser.slice(5)).toEqual([429, 429]);
    // Another client behind the same proxy is not slowed by the first one's guesses.
    expect((await from('10.9.8.7')).status).toBe(401);
    expect(new Set(await failureAddresses(server))).toEqual(new Set(['10.1.2.3', '10.9.8.7']));
  });

  it('without a trusted proxy, X-Forwarded-For is ignored: the socket address counts', async () => {
    const server = await startTestServer({ rateLimit: { requests: 30_000, windowMs: 60_000, authFailures: 5 } });
    t = server;
    const statuses: number[] = [];
    // A guesser cannot spread its attempts over invented addresses.
    for (let i = 0; i < 7; i++) statuses.push((await server.request('GET', '/v1/auth/me', { key: WRONG_KEY, headers: { 'X-Forwarded-For': `10.0.0.${i}` } })).status);
    expect(statuses.slice(5)).toEqual([429, 429]);
    const addresses = await failureAddresses(server);
    expect(addresses.every((a) => a !== null && /127\.0\.0\.1$/.test(a))).toBe(true);
  });
});
