/**
 * kill -9 the real `mia analyze` process in the middle of a scan, then start a server on the
 * same folder: the interrupted job is queued again and completes; every scan ends analysed with
 * exactly one result, findings belong only to succeeded analyses, and the database is intact.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer } from '#server/create-server.ts';
import { BIN, runMia } from '../imports/helpers.ts';
import { SEED_TEST_BASE } from './helpers.ts';
import { phantomDicom, type TruthSeries } from './analysis-helpers.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-analysis-resume-'));
const dataDir = join(work, 'data');
let truth: TruthSeries[];

function openDb(): BetterSqlite3.Database {
  return new BetterSqlite3(join(dataDir, 'mia.sqlite'), { readonly: true });
}

type JobRow = { id: number; status: string; owner_pid: number | null; slices_done: number; scan_status: string };

function jobs(): JobRow[] {
  const db = openDb();
  try {
    return db
      .prepare('SELECT a.id, a.status, a.owner_pid, a.slices_done, s.status AS scan_status FROM analyses a JOIN scans s ON s.id = a.scan_ref ORDER BY a.id')
      .all() as JobRow[];
  } finally {
    db.close();
  }
}

beforeAll(async () => {
  truth = await phantomDicom(work, 'series', { seed: SEED_TEST_BASE + 6400, series: 3, modality: 'both', slices: 120 });
  const imported = runMia(['import', join(work, 'series')], dataDir);
  expect(imported.status, imported.stderr).toBe(0);
}, 120_000);

afterAll(() => {
  rmSync(work, { recursive: true, force: true });
});

describe('an analysis interrupted by kill -9', () => {
  it('resumes after restart and completes; the database stays consistent', async () => {
    const child = spawn(process.execPath, [BIN, 'analyze', '--all', '--data', dataDir], { stdio: ['ignore', 'ignore', 'pipe'] });
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
    let interrupted: JobRow | undefined;
    const deadline = Date.now() + 60_000;
    while (!interrupted && Date.now() < deadline) {
      interrupted = jobs().find((j) => j.status === 'running' && j.slices_done > 0);
      if (!interrupted) await new Promise((r) => setTimeout(r, 5));
    }
    child.kill('SIGKILL');
    await exited;
    expect(interrupted, 'no job was caught mid-run').toBeDefined();

    // Left behind: a job `running` for a dead process, its scan `analyzing`.
    const left = jobs().find((j) => j.id === interrupted!.id)!;
    expect(left).toMatchObject({ status: 'running', owner_pid: child.pid, scan_status: 'analyzing' });

    const server = await createServer({ dataDir });
    try {
      const until = Date.now() + 60_000;
      while (jobs().some((j) => j.status === 'queued' || j.status === 'running') && Date.now() < until) {
        await new Promise((r) => setTimeout(r, 50));
      }
      // The queued ones the killed CLI had not reached run too.
      expect(jobs().map((j) => j.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
    } finally {
      await server.close();
    }

    const db = openDb();
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      expect(db.pragma('foreign_key_check')).toEqual([]);
      const scans = db
        .prepare(`SELECT s.scan_id, s.status, s.latest_analysis_ref, (SELECT COUNT(*) FROM analyses a WHERE a.scan_ref = s.id) AS analyses FROM scans s`)
        .all() as Array<{ scan_id: string; status: string; latest_analysis_ref: number; analyses: number }>;
      expect(scans.map((s) => s.scan_id).sort()).toEqual(truth.map((s) => s.scan_uid).sort());
      for (const s of scans) expect(s).toMatchObject({ status: 'analyzed', analyses: 1 });
      const resumed = db.prepare('SELECT status, slices_done, slices_total FROM analyses WHERE id = ?').get(interrupted!.id);
      expect(resumed).toEqual({ status: 'succeeded', slices_done: 120, slices_total: 120 });
      const orphans = db.prepare(`SELECT COUNT(*) AS n FROM findings f JOIN analyses a ON a.id = f.analysis_ref WHERE a.status != 'succeeded'`).get() as { n: number };
      expect(orphans.n).toBe(0);
    } finally {
      db.close();
    }
  });
});
