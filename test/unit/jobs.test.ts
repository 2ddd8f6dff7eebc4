/** Who owns a job: the one set of rules imports and analyses share (server/jobs), on a real SQLite file. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STALE_HEARTBEAT_MS, isAbandoned, pidAlive } from '#server/jobs/jobs.ts';
import { NODE_LEASE_MS, registerNode, type JobNode } from '#server/jobs/node.ts';
import { deleteNode, insertNode } from '#server/store/nodes.ts';
import { openDatabase, type SqliteDatabase } from '#server/store/sqlite.ts';
import { manualClock } from '../helpers/clock.ts';

const NOW = Date.parse('2026-03-02T09:00:00.000Z');
const beat = (agoMs: number) => new Date(NOW - agoMs).toISOString();

/** The pid of a process that has certainly ended. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

let dir: string;
let db: SqliteDatabase;
let me: JobNode;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-jobs-'));
  db = openDatabase(dir);
  const clock = manualClock();
  clock.set(new Date(NOW));
  me = await registerNode(db, clock, { heartbeat: false });
});
afterAll(async () => {
  await me.stop();
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A job owned by a node with this host, pid and last heartbeat. */
async function ownedBy(host: string, pid: number, heartbeatAgoMs: number): Promise<{ id: number; owner_node: number; owner_pid: number; heartbeat_at: string }> {
  const node = await insertNode(db, { host, pid, at: beat(heartbeatAgoMs) });
  return { id: 7, owner_node: node.id, owner_pid: pid, heartbeat_at: beat(0) };
}

describe('job ownership across nodes', () => {
  it('a node on this host: alive and beating keeps its job; dead, or silent past the stale limit (a reused pid), loses it', async () => {
    // The parent of this test process is alive and is not us.
    expect(pidAlive(process.ppid)).toBe(true);
    expect(await isAbandoned(db, me, 'analysis', await ownedBy(me.host, process.ppid, 1000), NOW)).toBe(false);
    expect(await isAbandoned(db, me, 'analysis', await ownedBy(me.host, process.ppid, STALE_HEARTBEAT_MS + 1), NOW)).toBe(true);
    const dead = deadPid();
    expect(pidAlive(dead)).toBe(false);
    expect(await isAbandoned(db, me, 'import', await ownedBy(me.host, dead, 0), NOW)).toBe(true);
  });

  it('a node on another host is judged by its lease alone, whatever its pid is here', async () => {
    // Its pid means nothing on this host: a dead pid here, a fresh beat there, keeps the job.
    expect(await isAbandoned(db, me, 'analysis', await ownedBy('other-host', deadPid(), 1000), NOW)).toBe(false);
    expect(await isAbandoned(db, me, 'analysis', await ownedBy('other-host', process.pid, NODE_LEASE_MS - 1), NOW)).toBe(false);
    expect(await isAbandoned(db, me, 'analysis', await ownedBy('other-host', process.pid, NODE_LEASE_MS + 1), NOW)).toBe(true);
  });

  it('an owner whose node row is gone (a clean stop removes it) abandons the job at once', async () => {
    const job = await ownedBy('other-host', 1, 0);
    expect(await isAbandoned(db, me, 'import', job, NOW)).toBe(false);
    await deleteNode(db, job.owner_node);
    expect(await isAbandoned(db, me, 'import', job, NOW)).toBe(true);
  });

  it('our own node keeps only the jobs it holds, per kind', async () => {
    const job = { id: 3, owner_node: me.id, owner_pid: process.pid, heartbeat_at: beat(0) };
    expect(await isAbandoned(db, me, 'analysis', job, NOW)).toBe(true);
    const release = me.hold('analysis', 3);
    expect(await isAbandoned(db, me, 'analysis', job, NOW)).toBe(false);
    // Held per kind: import job 3 is another row.
    expect(await isAbandoned(db, me, 'import', job, NOW)).toBe(true);
    release();
    expect(await isAbandoned(db, me, 'analysis', job, NOW)).toBe(true);
  });

  it('rows of a mia before nodes follow the pid rules', async () => {
    expect(await isAbandoned(db, me, 'analysis', { id: 1, owner_node: null, owner_pid: process.ppid, heartbeat_at: beat(1000) }, NOW)).toBe(false);
    expect(await isAbandoned(db, me, 'analysis', { id: 1, owner_node: null, owner_pid: process.ppid, heartbeat_at: beat(STALE_HEARTBEAT_MS + 1) }, NOW)).toBe(true);
    expect(await isAbandoned(db, me, 'import', { id: 2, owner_node: null, owner_pid: deadPid(), heartbeat_at: beat(0) }, NOW)).toBe(true);
    expect(await isAbandoned(db, me, 'import', { id: 2, owner_node: null, owner_pid: null, heartbeat_at: beat(0) }, NOW)).toBe(true);
  });
});
