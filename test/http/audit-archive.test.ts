/**
 * Audit retention (issue 10, defect 4): events older than the retention age move to compressed,
 * checksummed archive files, and GET /v1/audit reads them as it read the live rows.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { listAudit, recordAudit } from '#server/audit/audit.ts';
import { AUDIT_ARCHIVE_DIR, writeAuditArchive } from '#server/audit/archive.ts';
import { ARCHIVE_BATCH_EVENTS, archiveExpiredAudit, removeUnrecordedArchives, retentionCutoff } from '#server/audit/retention.ts';
import { resolveConfig } from '#server/config.ts';
import { createServer } from '#server/create-server.ts';
import { expiredAuditEvents } from '#server/store/audit.ts';
import { inTransaction } from '#server/store/database.ts';
import { manualClock } from '../helpers/clock.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedScan } from '../helpers/seed.ts';

const DAY = 24 * 60 * 60 * 1000;
const WRONG_KEY = `mia_${'A'.repeat(49)}`;

type Event = { id: number; at: string; action: string };

let t: TestServer | undefined;
afterEach(async () => {
  await t?.close();
  t = undefined;
});

/** Reads over four days (2026-03-01 to 03-04) by two users about two patients, and refused keys. */
async function seedActivity(server: TestServer): Promise<{ radiologist: { key: string; userId: string } }> {
  const db = server.server.services.db;
  const a = await seedScan(db, { patientId: 'ARC-1' });
  const b = await seedScan(db, { patientId: 'ARC-2', modality: 'CT' });
  const radiologist = await server.keyFor('radiologist');
  const day = async (): Promise<void> => {
    expect((await server.request('GET', `/v1/scans/${a.scanId}`)).status).toBe(200);
    expect((await server.request('GET', `/v1/scans/${b.scanId}`, { key: radiologist.key })).status).toBe(200);
    expect((await server.request('GET', '/v1/scans', { key: radiologist.key })).status).toBe(200);
    server.clock.advance(60 * 60 * 1000);
    expect((await server.request('GET', '/v1/scans?modality=CT')).status).toBe(200);
    for (let i = 0; i < 3; i += 1) expect((await server.request('GET', '/v1/auth/me', { key: WRONG_KEY })).status).toBe(401);
  };
  await day();
  server.clock.advance(DAY);
  await day();
  server.clock.advance(2 * DAY);
  await day();
  return { radiologist };
}

/** Every page of a listing, three events a page. */
async function everyPage(server: TestServer, query: string): Promise<Event[]> {
  const items: Event[] = [];
  let cursor: string | null = null;
  do {
    const reply = await server.request('GET', `/v1/audit?${query}&limit=3${cursor ? `&cursor=${cursor}` : ''}`);
    expect(reply.status).toBe(200);
    items.push(...(reply.json.data.items as Event[]));
    cursor = reply.json.data.next_cursor as string | null;
  } while (cursor);
  return items;
}

function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

describe('audit retention', () => {
  it('moves old events to checksummed files; every filter and page reads them as before', { timeout: 60_000 }, async () => {
    const server = await startTestServer({ auditRetentionDays: 30 });
    t = server;
    const { radiologist } = await seedActivity(server);
    // Day 0 and day 1 are past 30 days; day 3 is not.
    server.clock.set(new Date('2026-04-02T08:00:00.000Z'));
    const cutoff = retentionCutoff(server.clock.now(), 30);
    expect(cutoff).toBe('2026-03-03T00:00:00.000Z');

    const queries = [
      'order=oldest',
      'order=newest',
      'action=scans.read',
      'action=auth.failure',
      `user_id=${radiologist.userId}`,
      'patient_id=ARC-2',
      'action=scans.read&patient_id=ARC-1&order=newest',
      'since=2026-03-01T08:30:00.000Z&until=2026-03-04T12:00:00.000Z',
      'since=2026-03-02T00:00:00.000Z&order=newest',
      'until=2026-03-02T09:00:00.000Z',
    ];
    // Listing the audit is audited: only events from before the listings are compared.
    const seeded = (events: Event[]): Event[] => events.filter((e) => e.at < '2026-03-05');
    const before = new Map<string, Event[]>();
    for (const query of queries) {
      before.set(query, seeded(await everyPage(server, query)));
      expect(before.get(query)?.some((e) => e.at < cutoff), query).toBe(true);
    }

    const db = server.server.services.db;
    const oldRows = ((await db.get('SELECT count(*) AS n FROM audit_events WHERE at < ?', [cutoff])) as { n: number }).n;
    // Two days of four reads and one counted event for three refused keys.
    expect(oldRows).toBe(10);
    const records = await archiveExpiredAudit({ db, clock: server.clock, dataDir: server.dataDir, retentionDays: 30 });

    expect(((await db.get('SELECT count(*) AS n FROM audit_events WHERE at < ?', [cutoff])) as { n: number }).n).toBe(0);
    expect(records).toHaveLength(1);
    const [record] = records;
    const dir = join(server.dataDir, AUDIT_ARCHIVE_DIR);
    expect(readdirSync(dir).sort()).toEqual([record?.file.replace('.jsonl.gz', '.json'), record?.file]);
    const file = join(dir, record?.file ?? '');
    const sidecar = JSON.parse(readFileSync(file.replace('.jsonl.gz', '.json'), 'utf8'));
    expect(sidecar).toMatchObject({ format: 'mia-audit-archive/1', sha256: sha256(file), rows: oldRows, bytes: statSync(file).size });
    expect(gunzipSync(readFileSync(file)).toString('utf8').trim().split('\n')).toHaveLength(oldRows);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(sidecar.last_at < cutoff).toBe(true);

    for (const query of queries) expect(seeded(await everyPage(server, query)), query).toEqual(before.get(query));
    // The counted refusals keep their counts and addresses in the archive.
    const refusals = (await server.request('GET', '/v1/audit?action=auth.failure&until=2026-03-03T00:00:00.000Z')).json.data.items;
    expect(refusals.map((e: { count: number; address: string }) => [e.count, e.address.endsWith('127.0.0.1')])).toEqual([[3, true], [3, true]]);
    // Nothing is left to archive: a second run writes no file.
    expect(await archiveExpiredAudit({ db, clock: server.clock, dataDir: server.dataDir, retentionDays: 30 })).toEqual([]);
  });

  it('a damaged or missing archive file is an error naming it; reads that do not reach it still work', async () => {
    const server = await startTestServer({ auditRetentionDays: 30 });
    t = server;
    await seedActivity(server);
    server.clock.set(new Date('2026-04-02T08:00:00.000Z'));
    const db = server.server.services.db;
    const [record] = await archiveExpiredAudit({ db, clock: server.clock, dataDir: server.dataDir, retentionDays: 30 });
    const file = join(server.dataDir, AUDIT_ARCHIVE_DIR, record?.file ?? '');
    const content = readFileSync(file);
    const middle = content.length >> 1;
    content.writeUInt8(content.readUInt8(middle) ^ 0x01, middle);
    writeFileSync(file, content);

    const refused = await server.request('GET', '/v1/audit');
    expect(refused.status).toBe(500);
    expect(refused.json.error.message).toBe(`Audit archive audit-archive/${record?.file} is damaged`);
    expect(refused.json.error.details).toMatch(/SHA-256 is [0-9a-f]{64}, not the [0-9a-f]{64} recorded/);
    // A filter that matches nothing in the file still reads it: a damaged file is never skipped.
    expect((await server.request('GET', '/v1/audit?action=keys.create')).status).toBe(500);
    // Ranges and pages that stay among live events never open it.
    expect((await server.request('GET', '/v1/audit?since=2026-03-04T00:00:00.000Z')).status).toBe(200);
    expect((await server.request('GET', '/v1/audit?order=newest&limit=5')).status).toBe(200);

    rmSync(file);
    const missing = await server.request('GET', '/v1/audit?until=2026-03-02T00:00:00.000Z');
    expect(missing.status).toBe(500);
    expect(missing.json.error.details).toMatch(/^the file is missing/);
  });

  it('runs at start and hands out new ids after the archived ones; batches of 10,000 events a file', { timeout: 60_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'mia-audit-'));
    const clock = manualClock();
    try {
      const first = await createServer({ dataDir, clock, auditRetentionDays: 30 });
      const total = 2 * ARCHIVE_BATCH_EVENTS + 1;
      await inTransaction(first.services.db, async (tx) => {
        for (let i = 0; i < total; i += 1) {
          await recordAudit(tx, {
            at: clock.now().toISOString(), request_id: null, key_id: 'cli', user_id: 'cli', action: 'keys.list',
            target: null, patient_id: i % 2 === 0 ? 'ARC-9' : null, outcome: 'success', status_code: null,
          });
        }
      });
      await first.close();

      clock.advance(40 * DAY);
      const second = await createServer({ dataDir, clock, auditRetentionDays: 30 });
      try {
        const db = second.services.db;
        const live = async (): Promise<number> => ((await db.get('SELECT count(*) AS n FROM audit_events')) as { n: number }).n;
        await expect.poll(live, { timeout: 20_000 }).toBe(0);
        const archived = (await db.all('SELECT rows, first_id, last_id FROM audit_archives ORDER BY first_id'));
        expect(archived).toEqual([
          { rows: 10_000, first_id: 1, last_id: 10_000 },
          { rows: 10_000, first_id: 10_001, last_id: 20_000 },
          { rows: 1, first_id: 20_001, last_id: 20_001 },
        ]);
        // The table is empty, yet the next event does not take an archived event's id.
        await recordAudit(db, { at: clock.now().toISOString(), request_id: null, key_id: 'cli', user_id: 'cli', action: 'keys.list', target: null, patient_id: null, outcome: 'success', status_code: null });
        const ids: number[] = [];
        let afterId = 0;
        for (;;) {
          const page = await listAudit(second.services, { patientId: 'ARC-9' }, { afterId, limit: 4_000 });
          ids.push(...page.items.map((e) => e.id));
          if (page.nextAfterId === null) break;
          afterId = page.nextAfterId;
        }
        expect(ids).toEqual(Array.from({ length: ARCHIVE_BATCH_EVENTS + 1 }, (_, i) => 2 * i + 1));
        expect((await listAudit(second.services, { newestFirst: true }, { afterId: 0, limit: 1 })).items[0]?.id).toBe(total + 1);
      } finally {
        await second.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('a batch interrupted before its commit leaves no file behind; a file whose events are gone is kept', async () => {
    const server = await startTestServer({ auditRetentionDays: 30 });
    t = server;
    await seedActivity(server);
    server.clock.set(new Date('2026-04-02T08:00:00.000Z'));
    const db = server.server.services.db;
    const dir = join(server.dataDir, AUDIT_ARCHIVE_DIR);
    // As a crash between writing the file and committing its transaction leaves things.
    const due = await expiredAuditEvents(db, retentionCutoff(server.clock.now(), 30), 100);
    const interrupted = writeAuditArchive(dir, due.slice(0, 2), server.clock.now().toISOString());
    writeFileSync(join(dir, 'audit-000000000001-000000000002.jsonl.gz.tmp'), 'partial');
    writeFileSync(join(dir, 'audit-000000000003-000000000009.json'), '{}');
    writeFileSync(join(dir, 'notes.txt'), 'an operator\'s file');
    // A file from elsewhere, whose events this database does not hold.
    const foreign = writeAuditArchive(dir, [{ ...due[0]!, id: 900_001 }, { ...due[1]!, id: 900_002 }], server.clock.now().toISOString());

    const before = await everyPage(server, 'until=2026-03-03T00:00:00.000Z');
    const [record] = await archiveExpiredAudit({ db, clock: server.clock, dataDir: server.dataDir, retentionDays: 30 });
    expect(record?.rows).toBe(due.length);
    const sidecar = (file: string | undefined): string => (file ?? '').replace('.jsonl.gz', '.json');
    expect(readdirSync(dir).sort()).toEqual([record?.file, sidecar(record?.file), foreign.file, sidecar(foreign.file), 'notes.txt'].sort());
    expect(interrupted.file).not.toBe(record?.file);
    // Each event once, from the recorded file only.
    expect(await everyPage(server, 'until=2026-03-03T00:00:00.000Z')).toEqual(before);
    expect(await removeUnrecordedArchives(db, server.dataDir)).toEqual({ removed: [], kept: [foreign.file] });
  });

  it('a run that cannot write its file (here the folder is a file) leaves every event in the database', async () => {
    const server = await startTestServer({ auditRetentionDays: 30 });
    t = server;
    await seedActivity(server);
    server.clock.set(new Date('2026-04-02T08:00:00.000Z'));
    const before = await everyPage(server, 'until=2026-03-03T00:00:00.000Z');
    writeFileSync(join(server.dataDir, AUDIT_ARCHIVE_DIR), 'not a folder');
    const db = server.server.services.db;
    await expect(archiveExpiredAudit({ db, clock: server.clock, dataDir: server.dataDir, retentionDays: 30 })).rejects.toThrow();
    expect((await db.get('SELECT count(*) AS n FROM audit_archives'))).toEqual({ n: 0 });
    expect(await everyPage(server, 'until=2026-03-03T00:00:00.000Z')).toEqual(before);
  });

  it('the retention age is validated, 90 days unless configured', () => {
    expect(resolveConfig({ dataDir: '/tmp/x' }).auditRetentionDays).toBe(90);
    expect(() => resolveConfig({ dataDir: '/tmp/x', auditRetentionDays: 0 })).toThrow();
    expect(() => resolveConfig({ dataDir: '/tmp/x', auditRetentionDays: 1.5 })).toThrow();
  });
});
