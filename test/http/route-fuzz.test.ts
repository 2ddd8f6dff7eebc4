/**
 * Every route of the OpenAPI document, asked with hostile path segments, query values and bodies
 * (seeded, so a failure reproduces): no answer is a server error, every refusal of a /v1 route is
 * the standard error envelope, and the server answers normally afterwards. Path parameters are a
 * mix of hostile text and the ids of a real imported instance, so handlers get past their lookups.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedImportedInstance, type SeededInstance } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let seeded: SeededInstance;
let routes: { method: string; path: string; query: string[] }[] = [];

beforeAll(async () => {
  t = await startTestServer();
  seeded = await seedImportedInstance(t);
  const doc = (await t.request('GET', '/v1/openapi.json')).json.data as {
    paths: Record<string, Record<string, { parameters?: { in: string; name: string }[] }>>;
  };
  routes = Object.entries(doc.paths).flatMap(([path, ops]) =>
    Object.entries(ops).map(([method, op]) => ({ method: method.toUpperCase(), path, query: (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name) })),
  );
});
afterAll(async () => {
  await t.close();
});

/** Path and query values, each as it goes into the URL: some are encoded text, some are malformed encodings on purpose. */
const HOSTILE = [
  ...['', '0', '-1', '1e309', 'NaN', '99999999999999999999999', '\u0000', "'", '"', '\\', '../../etc/passwd', 'a'.repeat(10_000),
    '\u{1F4A9}', '[]', '{}', 'null', 'true', '1,2,3', '1.2.3.4.5', ' ', '*', '?', '0x10', '2147483648', '9007199254740993',
    '1.5', 'SELECT 1; --'].map(encodeURIComponent),
  '%', '%ff', '%E0%A4%A', '%ED%A0%80', '..%2F..%2Fetc', '%00',
];
const BODIES = [
  '{', '[]', 'null', '1', '"x"', '{"a":1}', '{"path":"/nonexistent/mia-fuzz"}', '{"path":1}', '{"__proto__":{"admin":true}}',
  '{"limit":-1}', JSON.stringify({ name: 'a'.repeat(100_000) }), '{"status":"final","text":"\\u0000"}', '{"box":{"x":1e999}}',
  '{"label":"x","box":[1,2]}', '{"constructor":{"prototype":{"x":1}}}',
];
const TYPES = ['application/json', 'application/json', 'text/plain', 'multipart/related; type="application/dicom"; boundary=x', 'application/dicom'];

/** A small seeded generator (mulberry32): the same cases on every run. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

describe('hostile requests to every route', () => {
  it('never get a server error; every /v1 refusal is the error envelope; the server still answers', { timeout: 240_000 }, async () => {
    const rand = random(20261128);
    const pick = <T>(list: readonly T[]): T => list[Math.floor(rand() * list.length)] as T;
    const real: Record<string, string> = {
      scan_id: seeded.scanId, study: seeded.studyUid, series: seeded.scanId, instance: seeded.instanceUid, instance_uid: seeded.instanceUid, frame: '1', frames: '1',
    };
    const problems: string[] = [];
    let asked = 0;
    for (let round = 0; round < 4; round++) {
      for (const route of routes) {
        const path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => (rand() < 0.5 && real[name] ? real[name] : pick(HOSTILE)));
        const query = route.query.filter(() => rand() < 0.5).map((name) => `${name}=${pick(HOSTILE)}`);
        if (route.query.length > 0 && rand() < 0.2) query.push(`${route.query[0]}=1&${route.query[0]}=2`);
        const url = path + (query.length > 0 ? `?${query.join('&')}` : '');
        const withBody = route.method !== 'GET' && route.method !== 'DELETE';
        const reply = await t.request(route.method, url, withBody ? { rawBody: pick(BODIES), headers: { 'Content-Type': pick(TYPES) } } : {});
        asked++;
        const what = `${route.method} ${url.slice(0, 160)} -> ${reply.status}`;
        if (reply.status >= 500) problems.push(`${what}: ${reply.text.slice(0, 200)}`);
        else if (reply.status >= 400 && path.startsWith('/v1/')) {
          const envelope = reply.json as { status?: string; error?: { code?: number; message?: unknown } } | undefined;
          if (envelope?.status !== 'error' || envelope.error?.code !== reply.status || typeof envelope.error.message !== 'string') {
            problems.push(`${what}: not the error envelope: ${reply.text.slice(0, 200)}`);
          }
        }
      }
    }
    expect(asked).toBeGreaterThan(400);
    expect(problems, problems.join('\n')).toEqual([]);
    const me = await t.request('GET', '/v1/auth/me');
    expect(me.status).toBe(200);
    expect(me.json.data.user.role).toBe('admin');
  });
});
