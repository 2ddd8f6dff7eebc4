/**
 * kill -9 of a process whose WAL checkpoints run on a worker thread (server/store/wal-checkpointer.ts),
 * at varying points of a continuous stream of commits and checkpoints: every commit the process
 * reported is there after a reopen, and the database is sound.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '#server/store/sqlite.ts';

const WRITER = join(import.meta.dirname, 'wal-writer-process.ts');
const dataDir = mkdtempSync(join(tmpdir(), 'mia-wal-kill-'));

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** Runs the writer until it has reported `atLeast` more rows, kills it, and resolves with the last count it reported. */
function writeThenKill(atLeast: number): Promise<number> {
  const child = spawn(process.execPath, ['--import', 'tsx', WRITER, dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    let buffered = '';
    let first: number | null = null;
    let last = 0;
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop() ?? '';
      for (const line of lines) {
        if (line === 'ready') continue;
        last = Number(line);
        first ??= last;
        if (last - first >= atLeast && child.exitCode === null && !child.killed) child.kill('SIGKILL');
      }
    });
    child.once('exit', (code, signal) => {
      if (signal === 'SIGKILL') resolve(last);
      else reject(new Error(`writer exited ${code}: ${stderr.trim()}`));
    });
  });
}

describe('kill -9 while WAL checkpoints run on a worker thread', () => {
  it('keeps every reported commit and a sound database, kill after kill', async () => {
    for (const atLeast of [500, 1300, 2100, 700]) {
      const reported = await writeThenKill(atLeast);
      const db = openDatabase(dataDir);
      try {
        expect(db.connection.pragma('integrity_check', { simple: true })).toBe('ok');
        const { n } = (await db.get<{ n: number }>('SELECT COUNT(*) AS n FROM load')) ?? { n: 0 };
        expect(n).toBeGreaterThanOrEqual(reported);
      } finally {
        await db.close();
      }
    }
  });
});
