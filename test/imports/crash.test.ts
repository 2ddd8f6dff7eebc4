/**
 * kill -9 the real `mia import` process at seeded random points of its progress, re-run it each
 * time, and check what a crash may never leave behind: a damaged database, an indexed instance
 * without its file (or with other bytes), a committed instance lost, or wrong final counts once
 * the import completes. Kills are placed by committed instances, not by the clock: a clock
 * places them all in start-up on a busy machine ("instances after each kill: 0, 0, 0...").
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makePhantoms, runMia } from './helpers.ts';
import { archiveTempFiles, killWhen, readCount, spawnMia } from '../helpers/kill.ts';
import { seededRandom } from '../helpers/random.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-crash-'));
const corpus = join(work, 'corpus');
const dataDir = join(work, 'data');
const SERIES = 12;
const SLICES = 120;
const TOTAL = SERIES * SLICES;
/** Kills stop this far from the end, so the last one still lands mid-import. */
const LAST_KILL_BEFORE_END = 400;

const instanceCount = (): number => readCount(dataDir, 'SELECT COUNT(*) FROM instances');

/**
 * Starts `mia import` and kill -9 once at least `target` instances are committed, and with
 * `midBatch` while files of the next batch are staged but not yet in the archive. Resolves with
 * the instances committed at the kill.
 */
async function importAndKill(target: number, midBatch: boolean): Promise<number | undefined> {
  const run = spawnMia(['import', corpus], dataDir);
  const observed = await killWhen(
    run.child,
    () => ({ committed: instanceCount(), staged: midBatch ? archiveTempFiles(dataDir).length : 0 }),
    (o) => o.committed >= target && (!midBatch || o.staged > 0),
    `${target} instances committed (output: ${run.output()})`,
  );
  return observed?.committed;
}

function openDb(): BetterSqlite3.Database {
  return new BetterSqlite3(join(dataDir, 'mia.sqlite'), { readonly: true });
}

function checkConsistent(): void {
  const db = openDb();
  try {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(db.pragma('foreign_key_check')).toEqual([]);
    const rows = db.prepare('SELECT sop_instance_uid, file_path, file_sha256, file_size FROM instances').all() as Array<{
      sop_instance_uid: string;
      file_path: string;
      file_sha256: string;
      file_size: number;
    }>;
    for (const row of rows) {
      const path = join(dataDir, row.file_path);
      expect(existsSync(path), row.file_path).toBe(true);
      const bytes = readFileSync(path);
      expect(bytes.length).toBe(row.file_size);
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(row.file_sha256);
      expect(row.file_path).not.toMatch(/\.tmp$/);
    }
    // The scan counts agree with the instances committed with them.
    const drift = db.prepare('SELECT COUNT(*) AS n FROM scans s WHERE s.instance_count != (SELECT COUNT(*) FROM instances i WHERE i.scan_ref = s.id)').get() as { n: number };
    expect(drift.n).toBe(0);
    // Job counts and checkpoint move with the instances they describe.
    for (const job of db.prepare('SELECT * FROM import_jobs').all() as Array<Record<string, number>>) {
      expect(job['imported']! + job['duplicates']! + job['conflicts']! + job['rejected']!).toBe(job['files_seen']);
      expect(job['checkpoint']).toBe(job['files_seen']);
    }
  } finally {
    db.close();
  }
}

beforeAll(() => {
  makePhantoms(corpus, { series: SERIES, seed: 2024, size: 64, slices: SLICES });
});
afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe('crash safety of mia import', () => {
  it('survives kill -9 at random points, resumes, and completes with exact counts', async () => {
    const next = seededRandom(20261122);
    const progress: number[] = [];
    let committed = 0;
    while (committed < TOTAL - LAST_KILL_BEFORE_END) {
      // Commits come in batches of 100: every other kill waits for the next batch to be staged.
      const atKill = await importAndKill(committed + 40 + Math.floor(next() * 200), progress.length % 2 === 1);
      expect(atKill, `the import ended before its kill (instances after each kill: ${progress.join(', ')})`).toBeDefined();
      checkConsistent();
      // Whatever was committed when the process died is still there, and nothing more.
      expect(instanceCount()).toBe(atKill);
      committed = atKill ?? TOTAL;
      progress.push(committed);
    }
    expect(progress.length, `instances after each kill: ${progress.join(', ')}`).toBeGreaterThanOrEqual(4);
    const final = runMia(['import', corpus], dataDir);
    expect(final.status, final.stdout + final.stderr).toBe(0);
    checkConsistent();
    const db = openDb();
    try {
      expect((db.prepare('SELECT COUNT(*) AS n FROM instances').get() as { n: number }).n).toBe(TOTAL);
      const jobs = db.prepare('SELECT * FROM import_jobs ORDER BY id').all() as Array<Record<string, number | string>>;
      // Every re-run resumed the one job rather than starting another.
      expect(jobs).toHaveLength(1);
      const completed = jobs.filter((j) => j['status'] === 'completed');
      expect(completed).toHaveLength(1);
      expect(jobs.filter((j) => j['status'] === 'running')).toHaveLength(0);
      const job = completed[0]!;
      expect({ seen: job['files_seen'], total: job['files_total'], imported: job['imported'], rejected: job['rejected'] }).toEqual({
        seen: TOTAL,
        total: TOTAL,
        imported: TOTAL,
        rejected: 0,
      });
    } finally {
      db.close();
    }
    // Each re-run removed the temporary files of the process killed before it (patient data).
    expect(archiveTempFiles(dataDir)).toEqual([]);
    const again = runMia(['import', corpus], dataDir);
    expect(again.status).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`completed\\s+${TOTAL}\\s+0\\s+${TOTAL}\\s+0\\s+0`));
  }, 300_000);
});
