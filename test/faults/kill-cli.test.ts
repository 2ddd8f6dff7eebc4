/**
 * kill -9 of the CLI at progress points (issue 10, fault suite): `mia import` while a server
 * stores uploads into the same folder, and `mia analyze` in the middle of one scan, then of the
 * next. After each kill the database passes SQLite's checks and everything committed when the
 * process died is still there with its bytes; re-running the command finishes the work, and the
 * next command's clean-up removes the dead process's files but never the live server's.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { STAGING_DIR } from '#server/imports/archive.ts';
import { SEED_TEST_BASE } from '../analysis/helpers.ts';
import { phantomDicom } from '../analysis/analysis-helpers.ts';
import { archiveTempFiles, killWhen, readCount, spawnMia, stopWhen } from '../helpers/kill.ts';
import { makePhantoms, runMia } from '../imports/helpers.ts';
import { committedInstances, expectIntact, importJobStatuses, openReadOnly, sha256, type Acknowledged } from './checks.ts';
import { call, createKey, dicomFiles, startServe, type ServeProcess } from './serve-process.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-kill-cli-'));
const started: ServeProcess[] = [];

afterAll(() => {
  for (const server of started) if (server.alive()) server.child.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

const ownedBy = (pid: number | undefined) => (file: string): boolean => basename(file).includes(`.${pid ?? 0}.`);

describe('kill -9 of the mia CLI', () => {
  it('mia import beside a live server: nothing committed is lost, the clean-up spares the server, the re-run completes', async () => {
    const dataDir = join(work, 'import');
    const cliCorpus = join(work, 'cli-corpus');
    const uploadCorpus = join(work, 'upload-corpus');
    makePhantoms(cliCorpus, { series: 4, seed: 5120, size: 64, slices: 100, modality: 'CT' });
    makePhantoms(uploadCorpus, { series: 1, seed: 5121, size: 64, slices: 40, modality: 'MR' });
    const cliFiles = dicomFiles(cliCorpus).length;
    const uploads = dicomFiles(uploadCorpus).map((file) => readFileSync(file));
    const key = createKey(dataDir, 'faults@hospital.test');
    const server = await startServe(dataDir);
    started.push(server);
    const acknowledged: Acknowledged = new Map();
    const store = async (bytes: Buffer): Promise<void> => {
      const reply = await call(server.url, key, 'POST', '/v1/instances', { dicom: bytes });
      expect(reply.status, reply.text).toBe(200);
      for (const o of reply.json.data.outcomes as Array<{ sop_instance_uid: string }>) acknowledged.set(o.sop_instance_uid, sha256(bytes));
    };

    // 1. The import dies with one batch committed and the next staged.
    const cli = spawnMia(['import', cliCorpus], dataDir);
    let committed: Acknowledged = new Map();
    const stopped = await stopWhen(
      cli.child,
      () => ({ committed: readCount(dataDir, 'SELECT COUNT(*) FROM instances'), staged: archiveTempFiles(dataDir).filter(ownedBy(cli.pid)).length }),
      (o) => o.committed >= 100 && o.staged > 0,
      `a batch committed and one staged (output: ${cli.output()})`,
    );
    expect(stopped, cli.output()).toBeDefined();
    committed = committedInstances(dataDir);
    const cliExited = cli.exited;
    cli.child.kill('SIGKILL');
    await cliExited;
    expectIntact(dataDir, committed);
    expect(importJobStatuses(dataDir)).toMatchObject({ running: 1 });

    // 2. The server is held with an upload's file staged (its pid in the name), and a CLI
    //    command opens the folder meanwhile: the dead import's files go, the server's stay.
    const uploading = (async () => {
      for (const bytes of uploads) await store(bytes);
    })();
    // A staged file lives only for one fsync, so the poll may miss every one of the uploads:
    // then the server is stopped anyway and holds a staged file named as its archive names them.
    let planted: string | null = null;
    let held = await stopWhen(server.child, () => archiveTempFiles(dataDir).filter(ownedBy(server.child.pid)), (files) => files.length > 0, 'an upload staged by the server', 15_000).catch(() => undefined);
    if (!held) {
      server.child.kill('SIGSTOP');
      planted = join(dataDir, STAGING_DIR, `.${'0'.repeat(16)}.${server.child.pid ?? 0}.1.tmp`);
      writeFileSync(planted, 'staged by a live server');
      held = [planted];
    }
    const listed = runMia(['users', 'list'], dataDir);
    expect(listed.status, listed.stderr).toBe(0);
    const left = archiveTempFiles(dataDir);
    expect(left.filter(ownedBy(cli.pid))).toEqual([]);
    for (const file of held) expect(left).toContain(file);
    if (planted) rmSync(planted);
    server.child.kill('SIGCONT');

    // 3. The import runs again beside the uploads and completes the one job; every upload was
    //    answered 200 and is stored.
    const again = runMia(['import', cliCorpus], dataDir);
    expect(again.status, again.stderr).toBe(0);
    expect(again.stderr).toContain('resuming import');
    await uploading;
    expect(acknowledged.size).toBe(uploads.length);
    expect(await server.stop()).toBe(0);
    expectIntact(dataDir, new Map([...committed, ...acknowledged]));
    expect(readCount(dataDir, 'SELECT COUNT(*) FROM instances')).toBe(cliFiles + uploads.length);
    const db = openReadOnly(dataDir);
    try {
      const path = db.prepare(`SELECT status, imported, files_total FROM import_jobs WHERE kind = 'path'`).all();
      expect(path).toEqual([{ status: 'completed', imported: cliFiles, files_total: cliFiles }]);
      expect(db.prepare(`SELECT COUNT(*) AS n FROM import_jobs WHERE status != 'completed'`).get()).toEqual({ n: 0 });
    } finally {
      db.close();
    }
    expect(archiveTempFiles(dataDir)).toEqual([]);
  }, 300_000);

  it('mia analyze, killed mid-scan twice: results stand, re-runs resume, every scan analysed once', async () => {
    const dataDir = join(work, 'analyze');
    await phantomDicom(work, 'analyze-series', { seed: SEED_TEST_BASE + 7200, series: 2, modality: 'both', slices: 120 });
    const imported = runMia(['import', join(work, 'analyze-series')], dataDir);
    expect(imported.status, imported.stderr).toBe(0);
    const instances = committedInstances(dataDir);

    type Job = { id: number; status: string; done: number; total: number };
    const jobs = (): Job[] => {
      const db = openReadOnly(dataDir);
      try {
        return db.prepare('SELECT id, status, slices_done AS done, COALESCE(slices_total, 0) AS total FROM analyses ORDER BY id').all() as Job[];
      } catch {
        return [];
      } finally {
        db.close();
      }
    };
    const findingsOf = (jobId: number): unknown[] => {
      const db = openReadOnly(dataDir);
      try {
        return db.prepare('SELECT * FROM findings WHERE analysis_ref = ? ORDER BY id').all(jobId);
      } finally {
        db.close();
      }
    };
    const midScan = (index: number) => (all: Job[]): boolean => {
      const job = all[index];
      return all.slice(0, index).every((j) => j.status === 'succeeded') && job?.status === 'running' && job.done > 0 && job.done < job.total;
    };

    // Killed in the first scan, then (re-run) in the second, once the first has its result.
    for (const index of [0, 1]) {
      const run = spawnMia(['analyze', '--all'], dataDir);
      const atKill = await killWhen(run.child, jobs, midScan(index), `scan ${index + 1} half analysed (output: ${run.output()})`);
      expect(atKill, run.output()).toBeDefined();
      expectIntact(dataDir, instances);
      expect(jobs()[index]).toMatchObject({ status: 'running', done: atKill?.[index]?.done });
      if (index === 1) expect(findingsOf(jobs()[0]?.id ?? 0).length).toBeGreaterThan(0);
    }
    const firstJob = jobs()[0];
    const firstFindings = findingsOf(firstJob?.id ?? 0);

    const finished = runMia(['analyze', '--all'], dataDir);
    expect(finished.status, finished.stdout + finished.stderr).toBe(0);
    expectIntact(dataDir, instances);
    expect(jobs().map((j) => j.status)).toEqual(['succeeded', 'succeeded']);
    expect(findingsOf(firstJob?.id ?? 0)).toEqual(firstFindings);
    const db = openReadOnly(dataDir);
    try {
      expect(db.prepare(`SELECT status FROM scans ORDER BY id`).all()).toEqual([{ status: 'analyzed' }, { status: 'analyzed' }]);
      const orphans = db.prepare(`SELECT COUNT(*) AS n FROM findings f JOIN analyses a ON a.id = f.analysis_ref WHERE a.status != 'succeeded'`).get();
      expect(orphans).toEqual({ n: 0 });
    } finally {
      db.close();
    }
  }, 300_000);
});
