/**
 * `mia serve` as users start it (bin/mia.js, the compiled CLI) runs its worker threads: the WAL
 * checkpointer starts (no "unavailable" in the log), and once writes stop it empties the
 * write-ahead log, which SQLite's own automatic checkpoints never do.
 */
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { call, createKey, eventually, startServe, type ServeProcess } from './serve-process.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'mia-serve-workers-'));
let server: ServeProcess | undefined;

afterAll(async () => {
  await server?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

describe('mia serve, compiled, with its worker threads', () => {
  it('checkpoints on its worker and empties the WAL once writes stop', async () => {
    const key = createKey(dataDir, 'admin@hospital.test');
    server = await startServe(dataDir);
    // Each request writes its audit event: the WAL grows.
    for (let i = 0; i < 40; i += 1) expect((await call(server.url, key, 'GET', '/v1/scans')).status).toBe(200);
    const wal = join(dataDir, 'mia.sqlite-wal');
    await eventually('the WAL to be emptied after writes stop', () => statSync(wal, { throwIfNoEntry: false })?.size === 0, 20_000);
    const log = readFileSync(join(dataDir, 'logs', 'mia.log'), 'utf8');
    expect(log).not.toMatch(/wal_checkpointer_unavailable|wal_checkpointer_failed/);
  });
});
