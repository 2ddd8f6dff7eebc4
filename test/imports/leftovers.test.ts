/**
 * Crash leftovers (issue 10, defect 6): a `mia import` killed with -9 leaves temporary archive
 * files (whole DICOM files, patient data) and a job `running` for a dead process. The next mia
 * process to open the folder, whatever the command, removes the dead writer's files and ends
 * the job as resumable, and leaves alone the files of a writer that is alive.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makePhantoms, runMia } from './helpers.ts';
import { archiveTempFiles, killWhen, readCount, spawnMia } from '../helpers/kill.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-leftovers-'));
const corpus = join(work, 'corpus');
const SERIES = 4;
const SLICES = 100;
const TOTAL = SERIES * SLICES;
/** A live process that is not mia: files named with its pid belong to a writer that is alive. */
let live: ChildProcess;
let livePid = 0;

type JobRow = { public_id: string; status: string; owner_pid: number | null; finished_at: string | null; error: string | null; imported: number };

function jobs(dataDir: string): JobRow[] {
  const db = new BetterSqlite3(join(dataDir, 'mia.sqlite'), { readonly: true });
  try {
    return db.prepare('SELECT public_id, status, owner_pid, finished_at, error, imported FROM import_jobs ORDER BY id').all() as JobRow[];
  } finally {
    db.close();
  }
}

function tempName(pid: number, n: number): string {
  return `.${'ab'.repeat(8)}.${pid}.${n}.tmp`;
}

beforeAll(() => {
  makePhantoms(corpus, { series: SERIES, seed: 7310, size: 64, slices: SLICES });
  live = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)'], { stdio: 'ignore' });
  livePid = live.pid ?? 0;
});

afterAll(() => {
  live.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

describe('what a killed import leaves behind', () => {
  it('is cleared by the next CLI command, which keeps a live writer\'s files; the import then resumes', async () => {
    const dataDir = join(work, 'killed');
    const run = spawnMia(['import', corpus], dataDir);
    const atKill = await killWhen(
      run.child,
      () => ({ committed: readCount(dataDir, 'SELECT COUNT(*) FROM instances'), temps: archiveTempFiles(dataDir) }),
      (o) => o.committed >= 100 && o.temps.length > 0,
      `a committed batch and a staged one (output: ${run.output()})`,
    );
    expect(atKill, run.output()).toBeDefined();
    const deadTemps = archiveTempFiles(dataDir);
    expect(deadTemps.length).toBeGreaterThan(0);
    expect(deadTemps.every((file) => basename(file).includes(`.${run.pid}.`))).toBe(true);
    expect(jobs(dataDir)).toEqual([expect.objectContaining({ status: 'running', owner_pid: run.pid })]);

    // Beside them: a live writer's file (must stay), and one of the same live pid untouched for
    // seven hours (a pid reused by another program: must go). And an upload spooled by the dead
    // process next to one a live receiver is still writing.
    // (Staged files sit in folders of the staging folder by digest, spooled ones at its top.)
    const staging = join(dataDir, 'archive', '.staging');
    mkdirSync(join(staging, 'a'), { recursive: true });
    writeFileSync(join(staging, 'a', tempName(livePid, 1)), 'DICM from a live writer');
    writeFileSync(join(staging, tempName(livePid, 2)), 'DICM from a pid since reused');
    writeFileSync(join(staging, 'a', tempName(livePid, 3)), 'DICM from a pid since reused');
    const sevenHoursAgo = new Date(Date.now() - 7 * 3600_000);
    for (const n of [2, 3]) utimesSync(join(staging, n === 2 ? '' : 'a', tempName(livePid, n)), sevenHoursAgo, sevenHoursAgo);
    const uploads = join(dataDir, 'tmp', 'uploads');
    for (const pid of [run.pid, livePid]) {
      mkdirSync(join(uploads, `${pid}-00ff00ff00ff00ff`), { recursive: true });
      writeFileSync(join(uploads, `${pid}-00ff00ff00ff00ff`, 'part-1'), 'DICM spooled');
    }
    // And an export being written (patient rows) by the dead process and by a live one.
    const exportsFolder = join(dataDir, 'exports');
    mkdirSync(exportsFolder, { recursive: true });
    for (const pid of [run.pid, livePid]) writeFileSync(join(exportsFolder, `exp_partial.csv.${pid}.partial`), 'patient_id,...');

    // A command that has nothing to do with imports, in a fresh process, and no server.
    const users = runMia(['users', 'list'], dataDir);
    expect(users.status, users.stderr).toBe(0);

    expect(archiveTempFiles(dataDir).map((file) => basename(file))).toEqual([tempName(livePid, 1)]);
    expect(readdirSync(uploads)).toEqual([`${livePid}-00ff00ff00ff00ff`]);
    expect(readdirSync(exportsFolder)).toEqual([`exp_partial.csv.${livePid}.partial`]);
    const [job] = jobs(dataDir);
    expect(job).toMatchObject({ status: 'interrupted', owner_pid: null, finished_at: null, imported: atKill?.committed });
    expect(job?.error).toMatch(/resumes when the same import runs again/);

    // Resumable: the same import picks the job up where it stopped.
    const again = runMia(['import', corpus], dataDir);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toContain(`resuming import ${job?.public_id ?? ''} after ${atKill?.committed ?? ''} files`);
    expect(jobs(dataDir)).toEqual([expect.objectContaining({ status: 'completed', imported: TOTAL })]);
    expect(archiveTempFiles(dataDir).map((file) => basename(file))).toEqual([tempName(livePid, 1)]);
  }, 120_000);

  it('a job whose process dies twice at the same file is failed, not resumed into it again', async () => {
    const dataDir = join(work, 'dies-twice');
    const run = spawnMia(['import', corpus], dataDir);
    const atKill = await killWhen(
      run.child,
      () => readCount(dataDir, 'SELECT COUNT(*) FROM instances'),
      (committed) => committed >= 100,
      `a committed batch (output: ${run.output()})`,
    );
    expect(atKill, run.output()).toBeDefined();
    expect(runMia(['users', 'list'], dataDir).status).toBe(0);
    const [first] = jobs(dataDir);
    expect(first).toMatchObject({ status: 'interrupted', finished_at: null });

    // The resumed run dies again before committing anything more, as it would on a file that
    // takes the process down: the row as such a death leaves it.
    const dead = spawnMia(['--help'], dataDir);
    await dead.exited;
    const db = new BetterSqlite3(join(dataDir, 'mia.sqlite'));
    db.prepare(`UPDATE import_jobs SET status = 'running', owner_pid = ?, heartbeat_at = ?, error = NULL`).run(dead.pid, new Date().toISOString());
    db.close();

    expect(runMia(['users', 'list'], dataDir).status).toBe(0);
    const [given] = jobs(dataDir);
    expect(given).toMatchObject({ status: 'failed', owner_pid: null, imported: atKill });
    expect(given?.finished_at).not.toBeNull();
    expect(given?.error).toMatch(new RegExp(`stopped twice at file ${(atKill ?? 0) + 1} of ${TOTAL} without getting further; not resumed again`));

    // Importing again is a new job; what the first stored counts as duplicates.
    const again = runMia(['import', corpus], dataDir);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).not.toContain('resuming import');
    expect(jobs(dataDir).map((j) => j.status)).toEqual(['failed', 'completed']);
    expect(readCount(dataDir, 'SELECT COUNT(*) FROM instances')).toBe(TOTAL);
  }, 120_000);

  it('sweeps temporary files an older mia left beside the stored ones, once', async () => {
    const dataDir = join(work, 'older');
    const created = runMia(['users', 'list'], dataDir);
    expect(created.status, created.stderr).toBe(0);
    // As before the staging folder: temporary files in the archive's own folders.
    rmSync(join(dataDir, 'archive', '.staging'), { recursive: true });
    const shard = join(dataDir, 'archive', 'ab');
    mkdirSync(shard, { recursive: true });
    const dead = spawnMia(['--help'], dataDir);
    await dead.exited;
    const stored = `${'ab'.repeat(32)}.dcm`;
    writeFileSync(join(shard, stored), 'DICM stored');
    writeFileSync(join(shard, tempName(livePid, 1)), 'DICM from a live writer');
    writeFileSync(join(shard, tempName(dead.pid, 1)), 'DICM from a dead writer');

    const listed = runMia(['users', 'list'], dataDir);
    expect(listed.status, listed.stderr).toBe(0);
    expect(readdirSync(shard).sort()).toEqual([tempName(livePid, 1), stored].sort());
    expect(readdirSync(join(dataDir, 'archive', '.staging'))).toEqual([]);
  });
});
