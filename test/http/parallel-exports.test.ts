/**
 * Large exports rendered by worker threads (server/exports/parallel-export.ts): the file is the
 * same, byte for byte, as the one a single thread writes, in each format, with filters and
 * de-identified; and an export whose workers cannot read fails whole, leaving no file behind, as
 * does one whose record cannot be stored.
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedAnalysedScans } from '../../bench/seed-results.ts';
import { authenticate, type AuthContext } from '#server/auth/authenticate.ts';
import { createExport, exportsDir, type ExportDeps, type ExportTuning } from '#server/exports/exports.ts';
import { DATABASE_FILE } from '#server/store/sqlite.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/** Pages of 25 (JSON, XML) and 100 (CSV) scans: many ranges per worker, a short last one. */
const SCANS = 1_234;

let t: TestServer;
let deps: ExportDeps;
let caller: AuthContext;
beforeAll(async () => {
  t = await startTestServer();
  const key = await seedAnalysedScans(t.server.services.db, SCANS);
  const { db, clock } = t.server.services;
  deps = { db, clock, dataDir: t.dataDir, config: t.server.services.config };
  const outcome = await authenticate(db, clock, `Bearer ${key}`);
  if (!outcome.ok) throw new Error(outcome.reason);
  caller = outcome.auth;
});
afterAll(async () => {
  await t.close();
});

const ONE_THREAD: ExportTuning = { workers: 1 };
const THREE_WORKERS: ExportTuning = { workers: 3, parallelMinScans: 1 };

/** The file's text with the export's own id and time (the only parts meant to differ) taken out. */
async function exported(format: 'csv' | 'json' | 'xml', tuning: ExportTuning, filters: Record<string, unknown> = {}, deidentify = false): Promise<{ text: string; rows: number }> {
  const record = await createExport(deps, caller, { format, filters, deidentify }, tuning);
  const text = readFileSync(join(exportsDir(t.dataDir), `${record.id}.${format}`), 'utf8');
  return { text: text.replaceAll(record.id, 'EXPORT').replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/, 'AT'), rows: record.row_count };
}

/** Worker threads read a workstation's SQLite file; a hub's PostgreSQL exports are one thread. */
const onSqlite = (context: { skip: (note?: string) => void }): void => {
  if (deps.db.dialect !== 'sqlite') context.skip('exports use worker threads on SQLite only');
};

describe('exports rendered by worker threads', () => {
  for (const format of ['csv', 'json', 'xml'] as const) {
    it(`${format}: the same file as one thread writes`, async (context) => {
      onSqlite(context);
      const one = await exported(format, ONE_THREAD);
      const many = await exported(format, THREE_WORKERS);
      expect(one.rows).toBe(SCANS);
      expect(many.rows).toBe(SCANS);
      expect(many.text).toBe(one.text);
    });
  }

  it('filtered and de-identified: the same file as one thread writes', async (context) => {
    onSqlite(context);
    const filters = { label: 'tumor_detected', min_confidence: 0.5 };
    const one = await exported('json', ONE_THREAD, filters, true);
    const many = await exported('json', THREE_WORKERS, filters, true);
    expect(one.rows).toBeGreaterThan(0);
    expect(one.rows).toBeLessThan(SCANS);
    expect(many.text).toBe(one.text);
    expect(many.text).not.toMatch(/BENCH-\d/);
  });

  it('fails whole, with no file left, when a worker cannot open the store', async (context) => {
    onSqlite(context);
    // The workers' data folder holds no SQLite database, only bytes that are not one.
    const dataDir = join(t.dataDir, 'damaged');
    mkdirSync(dataDir);
    writeFileSync(join(dataDir, DATABASE_FILE), Buffer.alloc(8192, 0x5a));
    await expect(createExport({ ...deps, dataDir }, caller, { format: 'csv', filters: {}, deidentify: false }, THREE_WORKERS)).rejects.toThrow(/not a database/);
    expect(readdirSync(exportsDir(dataDir))).toEqual([]);
  });

  it('fails whole, with no file left, when a worker thread dies while rendering', async (context) => {
    onSqlite(context);
    mkdirSync(exportsDir(t.dataDir), { recursive: true });
    const before = readdirSync(exportsDir(t.dataDir));
    // The thread stops as one that ran out of memory would: after it said it was ready, with ranges asked of it.
    const crash: ExportTuning = { ...THREE_WORKERS, onWorker: (worker) => void worker.once('message', () => void worker.terminate()) };
    await expect(createExport(deps, caller, { format: 'json', filters: {}, deidentify: false }, crash)).rejects.toThrow(/export worker exited/);
    expect(readdirSync(exportsDir(t.dataDir))).toEqual(before);
    // The store still exports.
    expect((await exported('csv', THREE_WORKERS)).rows).toBe(SCANS);
  });
  it('leaves no file behind when its record cannot be stored', async (context) => {
    onSqlite(context);
    mkdirSync(exportsDir(t.dataDir), { recursive: true });
    const before = readdirSync(exportsDir(t.dataDir));
    // The record's insert fails as on a full disk, after the file was written.
    await deps.db.run("CREATE TEMP TRIGGER refuse_exports BEFORE INSERT ON exports BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END");
    try {
      await expect(createExport(deps, caller, { format: 'csv', filters: {}, deidentify: false }, ONE_THREAD)).rejects.toThrow(/disk is full/);
    } finally {
      await deps.db.run('DROP TRIGGER refuse_exports');
    }
    expect(readdirSync(exportsDir(t.dataDir))).toEqual(before);
  });
});
