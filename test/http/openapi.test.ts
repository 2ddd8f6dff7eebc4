/** Real responses of every JSON route are valid against the served OpenAPI 3.1 document. */
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticate } from '#server/auth/authenticate.ts';
import { ROUTES } from '#server/http/routes/index.ts';
import { routeRequests, type Caller } from '../helpers/route-requests.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let admin: Caller;
let document: any;

beforeAll(async () => {
  t = await startTestServer();
  const outcome = await authenticate(t.server.services.db, t.clock, `Bearer ${t.adminKey}`);
  if (!outcome.ok) throw new Error('admin key failed');
  admin = { role: 'admin', key: t.adminKey, auth: outcome.auth };
  document = (await t.request('GET', '/v1/openapi.json')).json.data;
});
afterAll(async () => {
  await t.close();
});

describe('OpenAPI document', () => {
  it('is OpenAPI 3.1 and lists every route of the table', () => {
    expect(document.openapi).toBe('3.1.0');
    for (const route of ROUTES) {
      for (const path of [route.path, ...route.aliases]) expect(document.paths[path]?.[route.method], `${route.method} ${path}`).toBeDefined();
    }
  });

  const jsonRoutes = ROUTES.filter((route) => route.response).flatMap((route) => [route.path, ...route.aliases].map((path) => ({ route, path })));

  it.each(jsonRoutes)('$route.method $path: a real response matches its schema', async ({ route, path }) => {
    const requests = await routeRequests(t);
    const call = await requests[`${route.method.toUpperCase()} ${path}`]!(admin);
    // A device's routes answer its key (call.key); every other route the admin's.
    const reply = await t.request(route.method.toUpperCase(), call.path, { ...(call.key ? { key: call.key } : {}), body: call.body, rawBody: call.rawBody, headers: { ...call.headers, 'API-Version': '1' } });
    expect(reply.status).toBe(route.successStatus);
    const schema = document.paths[path][route.method].responses[String(route.successStatus)].content['application/json'].schema;
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    const validate = ajv.compile({ ...schema, components: document.components });
    const valid = validate(reply.json);
    expect(validate.errors ?? [], JSON.stringify(validate.errors?.slice(0, 3))).toEqual([]);
    expect(valid).toBe(true);
  });

  it('error responses match the ErrorEnvelope schema', async () => {
    const ajv = new Ajv2020({ strict: false });
    const validate = ajv.compile({ $ref: '#/components/schemas/ErrorEnvelope', components: document.components });
    for (const reply of [
      await t.request('GET', '/v1/scans', { key: null }),
      await t.request('GET', '/v1/scans/1.2.3'),
      await t.request('POST', '/v1/users', { body: {} }),
    ]) {
      expect(validate(reply.json), JSON.stringify(validate.errors)).toBe(true);
    }
  });
});
