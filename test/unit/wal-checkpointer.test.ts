/**
 * The server's WAL checkpoints run on a worker thread (server/store/wal-checkpointer.ts) with
 * SQLite's automatic ones off on the serving connection: under a steady stream of commits the
 * WAL must still stay bounded, the data must stay sound, and a second connection (the CLI) must
 * keep working beside it.
 */
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type SqliteDatabase } from '#server/store/sqlite.ts';
import { sqliteConnection, startTestServer } from '../helpers/server.ts';
import { startWalCheckpointer, type WalCheckpointer } from '#server/store/wal-checkpointer.ts';

const dirs: string[] = [];
const opened: SqliteDatabase[] = [];
let checkpointer: WalCheckpointer | undefined;

afterEach(async () => {
  await checkpointer?.stop();
  checkpointer = undefined;
  for (const db of opened.splice(0)) await db.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function open(dir?: string): SqliteDatabase {
  const dataDir = dir ?? mkdtempSync(join(tmpdir(), 'mia-wal-'));
  if (!dir) dirs.push(dataDir);
  const db = openDatabase(dataDir);
  opened.push(db);
  return db;
}

const MAX_FRAMES = 200;
const ROUNDS = 60;
const COMMITS_PER_ROUND = 40;

function walBytes(db: SqliteDatabase): number {
  try {
    return statSync(`${db.connection.name}-wal`).size;
  } catch {
    return 0;
  }
}

/** Commits in rounds, with `between` after each round; the WAL file's largest size seen. */
async function steadyWrites(db: SqliteDatabase, between: () => Promise<unknown>): Promise<number> {
  db.connection.exec('CREATE TABLE IF NOT EXISTS load (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  let largest = 0;
  for (let round = 0; round < ROUNDS; round += 1) {
    for (let i = 0; i < COMMITS_PER_ROUND; i += 1) {
      await db.transaction(async (tx) => {
        await tx.run('INSERT INTO load (body) VALUES (?)', [`row ${round}.${i} ${'x'.repeat(300)}`]);
      });
    }
    largest = Math.max(largest, walBytes(db));
    await between();
  }
  return largest;
}

describe('WAL checkpoints on a worker thread', () => {
  it('keep the WAL bounded under steady commits, which it is not without them', async () => {
    const db = open();
    const pageBytes = Number(db.connection.pragma('page_size', { simple: true }));
    // A round's commits fit well under the bound, so a WAL past it means checkpoints fell behind.
    const bound = 2 * MAX_FRAMES * (pageBytes + 24) + 32;

    db.connection.pragma('wal_autocheckpoint = 0');
    const unchecked = await steadyWrites(db, () => Promise.resolve());
    expect(unchecked).toBeGreaterThan(bound);
    db.connection.pragma('wal_checkpoint(TRUNCATE)');

    // An hour's interval: the test drives the rounds itself, so none depends on timing.
    checkpointer = await startWalCheckpointer(db, { intervalMs: 3_600_000, maxFrames: MAX_FRAMES });
    expect(db.connection.pragma('wal_autocheckpoint', { simple: true })).toBe(0);
    let rounds = 0;
    let copied = 0;
    const largest = await steadyWrites(db, async () => {
      const outcome = await checkpointer?.runOnce();
      rounds += 1;
      copied += outcome?.copied ?? 0;
    });
    expect(rounds).toBe(ROUNDS);
    expect(copied).toBeGreaterThan(0);
    expect(largest).toBeLessThanOrEqual(bound);

    expect(db.connection.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM load')).toEqual({ n: 2 * ROUNDS * COMMITS_PER_ROUND });
  });

  it('empties the WAL file once writes stop, and hands automatic checkpoints back on stop', async () => {
    const db = open();
    checkpointer = await startWalCheckpointer(db, { intervalMs: 3_600_000, maxFrames: MAX_FRAMES, idleTicks: 2 });
    await steadyWrites(db, () => Promise.resolve());
    expect(walBytes(db)).toBeGreaterThan(0);
    for (let i = 0; i < 4; i += 1) await checkpointer.runOnce();
    expect(walBytes(db)).toBe(0);

    await checkpointer.stop();
    checkpointer = undefined;
    expect(db.connection.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
  });

  it('leaves another connection to the same file (a CLI command) reading and writing, and the data there after a reopen', async () => {
    const db = open();
    checkpointer = await startWalCheckpointer(db, { intervalMs: 1, maxFrames: 50 });
    const dataDir = join(db.connection.name, '..');
    const cli = open(dataDir);
    cli.connection.exec('CREATE TABLE IF NOT EXISTS load (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
    // One after another: two connections of one thread would wait on each other's write lock in
    // busy_timeout, which holds the thread (a CLI command is another process).
    for (let i = 0; i < 300; i += 1) {
      await db.transaction((tx) => tx.run('INSERT INTO load (body) VALUES (?)', [`server ${i}`]));
      await cli.transaction((tx) => tx.run('INSERT INTO load (body) VALUES (?)', [`cli ${i}`]));
      if (i % 50 === 0) await checkpointer.runOnce();
    }
    expect(await cli.get<{ n: number }>('SELECT COUNT(*) AS n FROM load')).toEqual({ n: 600 });

    await checkpointer.stop();
    checkpointer = undefined;
    for (const each of opened.splice(0)) await each.close();
    const again = open(dataDir);
    expect(again.connection.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(await again.get<{ n: number }>('SELECT COUNT(*) AS n FROM load')).toEqual({ n: 600 });
  });

  it('runs in a server, beside a CLI command on the same folder, and stops with it', async () => {
    const server = await startTestServer();
    try {
      // The serving connection leaves checkpoints to the worker.
      expect(sqliteConnection(server.server.services.db).pragma('wal_autocheckpoint', { simple: true })).toBe(0);
      for (let i = 0; i < 20; i += 1) expect((await server.request('GET', '/v1/scan/results', { key: server.adminKey })).status).toBe(200);
      await server.server.runtime.audit.flush();
      const cli = open(server.dataDir);
      expect(cli.connection.pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
      expect(await cli.get<{ n: number }>("SELECT COUNT(*) AS n FROM audit_events WHERE action = 'results.list'")).toEqual({ n: 20 });
      await cli.close();
    } finally {
      await server.close();
    }
  });
});
