/**
 * A database that cannot grow (SQLITE_FULL, made here with max_page_count: the same error a
 * full disk gives SQLite) and a log folder that cannot be made: writes answer 507 with the
 * cause, nothing half-done shows, reads go on, and writing works again once there is room.
 * The real full disk (a tmpfs) is test/faults/disk-full.test.ts.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueKeyForUser } from '#server/auth/api-keys.ts';
import { createServer } from '#server/create-server.ts';
import { findOrCreateUser } from '#server/users/users.ts';
import { manualClock } from '../helpers/clock.ts';
import { onPostgres, sqliteConnection, startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

/** SQLite's upper limit of max_page_count: no limit in practice. */
const NO_PAGE_LIMIT = 4294967294;

describe('storage errors at the HTTP edge', () => {
  // SQLite's max_page_count fills the database at will; a PostgreSQL server's disk cannot be
  // filled from a connection (its 53100 is mapped in test/unit/storage-errors.test.ts).
  it.skipIf(onPostgres())('a write the database has no room for is 507 with the cause; reads and later writes work', async () => {
    const db = t.server.services.db;
    const scan = await seedScan(db, { patientId: 'FULL-1' });
    await seedAnalysis(db, scan, [{}]);
    const writer = (await t.keyFor('radiologist', { scopes: ['write:reports'] })).key;
    const draft = await t.request('POST', '/v1/reports', { key: writer, body: { scan_id: scan.scanId } });
    expect(draft.status).toBe(201);
    const id = draft.json.data.id as string;
    // 40 KB of text needs ten new pages; the free list cannot hold them.
    const long = { impression: 'i'.repeat(20_000), recommendation: 'r'.repeat(20_000) };
    expect(sqliteConnection(db).pragma('freelist_count', { simple: true })).toBeLessThan(10);
    sqliteConnection(db).pragma(`max_page_count = ${String(sqliteConnection(db).pragma('page_count', { simple: true }))}`);
    try {
      const full = await t.request('PATCH', `/v1/reports/${id}`, { key: writer, body: long });
      expect(full.status).toBe(507);
      expect(full.json).toMatchObject({
        status: 'error',
        error: { code: 507, title: 'Insufficient Storage', message: 'The disk holding the data folder is full' },
      });
      expect(full.json.error.details).toMatch(/^SQLITE_FULL: free space/);
      const read = await t.request('GET', `/v1/reports/${id}`, { key: writer });
      expect(read.status).toBe(200);
      expect(read.json.data.impression).toBe(draft.json.data.impression);
      expect((await t.request('GET', '/v1/scans')).status).toBe(200);
      await t.server.services.log.flush();
      const logged = readFileSync(join(t.dataDir, 'logs', 'mia.log'), 'utf8')
        .split('\n')
        .filter((line) => line.includes('"event":"storage.failed"'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(logged).toContainEqual(expect.objectContaining({ request_id: full.json.meta.request_id, status: 507, code: 'SQLITE_FULL', route: 'PATCH /v1/reports/{id}' }));
    } finally {
      sqliteConnection(db).pragma(`max_page_count = ${NO_PAGE_LIMIT}`);
    }
    const later = await t.request('PATCH', `/v1/reports/${id}`, { key: writer, body: long });
    expect(later.status).toBe(200);
    expect(later.json.data.impression).toBe(long.impression);
  });

  it('the OpenAPI description lists 507 and 503 with every operation', async () => {
    const document = (await t.request('GET', '/v1/openapi.json')).json.data;
    for (const [path, method] of [['/v1/instances', 'post'], ['/v1/exports', 'post'], ['/v1/scans', 'get']] as const) {
      expect(document.paths[path][method].responses['507'].description).toMatch(/full/);
      expect(document.paths[path][method].responses['503'].description).toMatch(/I\/O error/);
    }
  });

  it('a server starts and serves although its log folder cannot be made', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mia-nolog-'));
    // A file where logs/ belongs fails every open of the log, as a full disk does.
    writeFileSync(join(dataDir, 'logs'), '');
    const clock = manualClock();
    const server = await createServer({ dataDir, clock });
    try {
      const url = await server.listen(0, '127.0.0.1');
      const deps = { db: server.services.db, clock };
      const { user } = await findOrCreateUser(deps, { email: 'admin@hospital.test', role: 'admin' });
      const { key } = await issueKeyForUser(deps, { userRef: user.id, name: null, extraScopes: [] });
      for (let i = 0; i < 3; i += 1) {
        const me = await fetch(`${url}/v1/auth/me`, { headers: { Authorization: `Bearer ${key}` } });
        expect(me.status).toBe(200);
      }
      await server.services.log.flush();
    } finally {
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
