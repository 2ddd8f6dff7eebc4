/**
 * kill -9 the real `mia import` process at seeded random moments, re-run it each time, and check
 * what a crash may never leave behind: a damaged database, an indexed instance without its file
 * (or with other bytes), or wrong final counts once the import completes.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isArchiveTempName } from '#server/imports/archive.ts';
import { BIN, makePhantoms, runMia } from './helpers.ts';
import { seededRandom } from '../helpers/random.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-crash-'));
const corpus = join(work, 'corpus');
const dataDir = join(work, 'data');
const SERIES = 12;
const SLICES = 120;
const TOTAL = SERIES * SLICES;


/** Starts `mia import`, waits `afterMs` once it has printed its first progress line (or started), then kill -9. */
async function importAndKill(afterMs: number): Promise<boolean> {
  const child = spawn(process.execPath, [BIN, 'import', corpus, '--data', dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const timer = new Promise<'timer'>((resolve) => setTimeout(() => resolve('timer'), afterMs));
  const first = await Promise.race([exited, timer]);
  if (first !== 'timer') return false;
  child.kill('SIGKILL');
  await exited;
  return true;
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
    let kills = 0;
    const progress: number[] = [];
    let finishedUnkilled = false;
    for (let round = 0; round < 6; round++) {
      // tsx start-up takes ~0.5-1 s and the import itself about as long: kills land in both.
      const killed = await importAndKill(500 + Math.floor(next() * 1200));
      if (!killed) {
        finishedUnkilled = true;
        break;
      }
      kills++;
      if (existsSync(join(dataDir, 'mia.sqlite'))) {
        checkConsistent();
        const db = openDb();
        progress.push((db.prepare('SELECT COUNT(*) AS n FROM instances').get() as { n: number }).n);
        db.close();
      }
    }
    expect(kills).toBeGreaterThan(0);
    // At least one kill hit the middle of the import, not only start-up.
    expect(progress.some((n) => n > 0 && n < TOTAL), `instances after each kill: ${progress.join(', ')}`).toBe(true);
    if (!finishedUnkilled) {
      const final = runMia(['import', corpus], dataDir);
      expect(final.status, final.stdout + final.stderr).toBe(0);
    }
    checkConsistent();
    const db = openDb();
    try {
      expect((db.prepare('SELECT COUNT(*) AS n FROM instances').get() as { n: number }).n).toBe(TOTAL);
      const jobs = db.prepare('SELECT * FROM import_jobs ORDER BY id').all() as Array<Record<string, number | string>>;
      // Every re-run resumed the one job rather than starting another (unless killed before it existed).
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
    // Leftover temporary files are never indexed; any unreferenced archive file is harmless.
    const tmpFiles: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const p = join(dir, name);
        if (statSync(p).isDirectory()) walk(p);
        else if (name.endsWith('.tmp')) tmpFiles.push(p);
      }
    };
    walk(join(dataDir, 'archive'));
    for (const file of tmpFiles) expect(isArchiveTempName(basename(file)), file).toBe(true);
    const again = runMia(['import', corpus], dataDir);
    expect(again.status).toBe(0);
    expect(again.stdout).toMatch(new RegExp(`completed\\s+${TOTAL}\\s+0\\s+${TOTAL}\\s+0\\s+0`));
  }, 120_000);
});
