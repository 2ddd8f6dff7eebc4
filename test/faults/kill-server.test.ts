/**
 * kill -9 of a real `mia serve` process at progress points (issue 10, fault suite): while it
 * receives and stores uploads, and in the middle of an analysis. After each kill the database
 * passes SQLite's checks and nothing acknowledged is lost; the restarted server clears what the
 * dead one left (spooled uploads, jobs shown running) and finishes the work.
 */
import { request as httpRequest } from 'node:http';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { SEED_TEST_BASE } from '../analysis/helpers.ts';
import { phantomDicom } from '../analysis/analysis-helpers.ts';
import { archiveTempFiles, killWhen, readCount, spawnMia, stopWhen } from '../helpers/kill.ts';
import { makePhantoms, runMia } from '../imports/helpers.ts';
import { committedInstances, expectIntact, importJobStatuses, openReadOnly, sha256, type Acknowledged } from './checks.ts';
import { call, createKey, dicomFiles, eventually, startServe, type ServeProcess } from './serve-process.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-kill-server-'));
const started: ServeProcess[] = [];

afterAll(async () => {
  for (const server of started) if (server.alive()) server.child.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

async function serve(dataDir: string): Promise<ServeProcess> {
  const server = await startServe(dataDir);
  started.push(server);
  return server;
}

/** Bytes of request bodies the server has spooled so far (tmp/uploads/<pid>-<id>/part-N). */
function spooledBytes(dataDir: string): number {
  const root = join(dataDir, 'tmp', 'uploads');
  try {
    return readdirSync(root, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile())
      .reduce((sum, entry) => sum + (statSync(join(entry.parentPath, entry.name), { throwIfNoEntry: false })?.size ?? 0), 0);
  } catch {
    return 0;
  }
}

type Outcome = { outcome: string; sop_instance_uid: string | null };

/** POST /v1/instances of one file; the acknowledged instance is recorded. False once the server is gone. */
async function store(url: string, key: string, bytes: Buffer, acknowledged: Acknowledged): Promise<boolean> {
  let reply;
  try {
    reply = await call(url, key, 'POST', '/v1/instances', { dicom: bytes });
  } catch {
    return false;
  }
  expect(reply.status, reply.text).toBe(200);
  for (const o of reply.json.data.outcomes as Outcome[]) {
    expect(['imported', 'duplicate']).toContain(o.outcome);
    if (o.sop_instance_uid) acknowledged.set(o.sop_instance_uid, sha256(bytes));
  }
  return true;
}

/** A multipart/related body whose one part stops halfway: the request stays open until the server dies. */
function sendHalf(url: string, key: string, bytes: Buffer): Promise<void> {
  const boundary = 'mia-fault-suite-boundary';
  const req = httpRequest(`${url}/v1/instances`, {
    method: 'POST',
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': `multipart/related; type="application/dicom"; boundary=${boundary}` },
  });
  const ended = new Promise<void>((resolve) => {
    req.once('error', () => resolve());
    req.once('response', (res) => {
      res.resume();
      resolve();
    });
  });
  req.write(`--${boundary}\r\nContent-Type: application/dicom\r\n\r\n`);
  req.write(bytes.subarray(0, bytes.length >> 1));
  return ended;
}

describe('kill -9 of mia serve', () => {
  it('mid-upload: acknowledged instances survive, the restart clears the spool, and uploads go on', async () => {
    const dataDir = join(work, 'upload');
    const corpus = join(work, 'upload-corpus');
    makePhantoms(corpus, { series: 2, seed: 4411, size: 64, slices: 60, modality: 'CT' });
    const files = dicomFiles(corpus).map((file) => readFileSync(file));
    const key = createKey(dataDir, 'faults@hospital.test');
    const server = await serve(dataDir);
    const acknowledged: Acknowledged = new Map();

    const uploading = (async () => {
      for (const bytes of files) if (!(await store(server.url, key, bytes, acknowledged))) return;
    })();
    const half = sendHalf(server.url, key, files.at(-1) ?? Buffer.alloc(0));
    const atKill = await killWhen(
      server.child,
      () => ({ acknowledged: acknowledged.size, spooled: spooledBytes(dataDir) }),
      (o) => o.acknowledged >= 20 && o.spooled > 0,
      'uploads acknowledged while another is half received',
    );
    expect(atKill, server.output()).toBeDefined();
    await Promise.all([uploading, half]);
    expect(acknowledged.size).toBeGreaterThanOrEqual(20);
    expect(acknowledged.size).toBeLessThan(files.length);

    expectIntact(dataDir, acknowledged);
    // The half-received body is on disk under the dead server's pid, patient data included.
    const spool = join(dataDir, 'tmp', 'uploads');
    expect(readdirSync(spool).some((name) => name.startsWith(`${server.child.pid ?? ''}-`))).toBe(true);

    const restarted = await serve(dataDir);
    expect(readdirSync(spool)).toEqual([]);
    expect(archiveTempFiles(dataDir)).toEqual([]);
    expect(importJobStatuses(dataDir)['running'] ?? 0).toBe(0);

    for (const bytes of files) expect(await store(restarted.url, key, bytes, acknowledged)).toBe(true);
    expect(acknowledged.size).toBe(files.length);
    expect(await restarted.stop()).toBe(0);
    expectIntact(dataDir, acknowledged);
    expect(readCount(dataDir, 'SELECT COUNT(*) FROM instances')).toBe(files.length);
  }, 180_000);

  it('mid-analysis: a finished result stands, the interrupted analysis completes after restart', async () => {
    const dataDir = join(work, 'analysis');
    const truth = await phantomDicom(work, 'analysis-series', { seed: SEED_TEST_BASE + 7100, series: 2, modality: 'CT', slices: 120 });
    const imported = runMia(['import', join(work, 'analysis-series')], dataDir);
    expect(imported.status, imported.stderr).toBe(0);
    const instances = committedInstances(dataDir);
    const [first, second] = truth.map((t) => t.scan_uid);
    if (!first || !second) throw new Error('phantoms.py wrote fewer than two series');
    const key = createKey(dataDir, 'faults@hospital.test');
    const server = await serve(dataDir);

    const analyse = async (s: ServeProcess, scanId: string): Promise<string> => {
      const reply = await call(s.url, key, 'POST', `/v1/scans/${encodeURIComponent(scanId)}/analyses`, { json: {} });
      expect(reply.status, reply.text).toBe(202);
      return reply.json.data.id as string;
    };
    const status = async (s: ServeProcess, id: string): Promise<string> => {
      const reply = await call(s.url, key, 'GET', `/v1/analyses/${id}`);
      return reply.json.data.status as string;
    };
    const findings = (id: string): unknown[] => {
      const db = openReadOnly(dataDir);
      try {
        return db
          .prepare('SELECT f.* FROM findings f JOIN analyses a ON a.id = f.analysis_ref WHERE a.public_id = ? ORDER BY f.id')
          .all(id);
      } finally {
        db.close();
      }
    };

    const done = await analyse(server, first);
    await eventually('the first analysis', async () => (await status(server, done)) === 'succeeded', 120_000);
    const doneFindings = findings(done);

    const interrupted = await analyse(server, second);
    const progress = (): { status: string; done: number; total: number } => {
      const db = openReadOnly(dataDir);
      try {
        const row = db.prepare('SELECT status, slices_done, slices_total FROM analyses WHERE public_id = ?').get(interrupted) as
          | { status: string; slices_done: number; slices_total: number | null }
          | undefined;
        return { status: row?.status ?? 'none', done: row?.slices_done ?? 0, total: row?.slices_total ?? 0 };
      } finally {
        db.close();
      }
    };
    const atKill = await killWhen(server.child, progress, (p) => p.status === 'running' && p.done > 0 && p.done < p.total, 'the analysis half done');
    expect(atKill, server.output()).toBeDefined();

    expectIntact(dataDir, instances);
    expect(findings(done)).toEqual(doneFindings);
    expect(progress()).toMatchObject({ status: 'running', done: atKill?.done });

    const restarted = await serve(dataDir);
    await eventually('the interrupted analysis, resumed', async () => (await status(restarted, interrupted)) === 'succeeded', 120_000);
    expect(await status(restarted, done)).toBe('succeeded');
    expect(await restarted.stop()).toBe(0);

    expectIntact(dataDir, instances);
    expect(findings(done)).toEqual(doneFindings);
    const db = openReadOnly(dataDir);
    try {
      const scans = db.prepare('SELECT s.status, (SELECT COUNT(*) FROM analyses a WHERE a.scan_ref = s.id) AS analyses FROM scans s').all();
      expect(scans).toEqual([
        { status: 'analyzed', analyses: 1 },
        { status: 'analyzed', analyses: 1 },
      ]);
    } finally {
      db.close();
    }
  }, 300_000);

  it('mia analyze waiting on the server running its scan takes the job over when the server is killed', async () => {
    const dataDir = join(work, 'analyze-takeover');
    const truth = await phantomDicom(work, 'takeover-series', { seed: SEED_TEST_BASE + 7200, series: 1, modality: 'CT', slices: 120 });
    const imported = runMia(['import', join(work, 'takeover-series')], dataDir);
    expect(imported.status, imported.stderr).toBe(0);
    const scanId = truth[0]?.scan_uid;
    if (!scanId) throw new Error('phantoms.py wrote no series');
    const key = createKey(dataDir, 'faults@hospital.test');
    const server = await serve(dataDir);
    const reply = await call(server.url, key, 'POST', `/v1/scans/${encodeURIComponent(scanId)}/analyses`, { json: {} });
    expect(reply.status, reply.text).toBe(202);
    const progress = (): { status: string; done: number; total: number } => {
      const db = openReadOnly(dataDir);
      try {
        const row = db.prepare('SELECT status, slices_done, slices_total FROM analyses').get() as { status: string; slices_done: number; slices_total: number | null } | undefined;
        return { status: row?.status ?? 'none', done: row?.slices_done ?? 0, total: row?.slices_total ?? 0 };
      } finally {
        db.close();
      }
    };
    // The server frozen mid-analysis, alive: the command finds the job running elsewhere and waits.
    const frozen = await stopWhen(server.child, progress, (p) => p.status === 'running' && p.done > 0 && p.done < p.total, 'the analysis under way');
    expect(frozen, server.output()).toBeDefined();
    const cli = spawnMia(['analyze', scanId], dataDir);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    expect(progress().status).toBe('running');
    server.child.kill('SIGKILL');
    const exitCode = await new Promise<number | null>((resolve) => cli.child.once('exit', (code) => resolve(code)));
    expect(exitCode, cli.output()).toBe(0);
    expect(progress()).toMatchObject({ status: 'succeeded' });
  }, 300_000);
});
