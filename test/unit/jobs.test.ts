/** Who owns a job: the one set of rules imports and analyses share (server/jobs). */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { STALE_HEARTBEAT_MS, holdJob, isAbandoned, pidAlive } from '#server/jobs/jobs.ts';

const NOW = Date.parse('2026-03-02T09:00:00.000Z');
const beat = (agoMs: number) => new Date(NOW - agoMs).toISOString();

/** The pid of a process that has certainly ended. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

describe('job ownership', () => {
  it('a live owner with a fresh heartbeat keeps its job; a silent one loses it', () => {
    // The parent of this test process is alive and is not us.
    const other = process.ppid;
    expect(pidAlive(other)).toBe(true);
    expect(isAbandoned('analysis', { id: 1, owner_pid: other, heartbeat_at: beat(1000) }, NOW)).toBe(false);
    // A pid reused by another program never beats: after the stale limit the job is taken over.
    expect(isAbandoned('analysis', { id: 1, owner_pid: other, heartbeat_at: beat(STALE_HEARTBEAT_MS + 1) }, NOW)).toBe(true);
    expect(isAbandoned('import', { id: 1, owner_pid: other, heartbeat_at: null }, NOW)).toBe(true);
  });

  it('a dead owner or no owner abandons the job at once', () => {
    const dead = deadPid();
    expect(pidAlive(dead)).toBe(false);
    expect(isAbandoned('import', { id: 2, owner_pid: dead, heartbeat_at: beat(0) }, NOW)).toBe(true);
    expect(isAbandoned('import', { id: 2, owner_pid: null, heartbeat_at: beat(0) }, NOW)).toBe(true);
  });

  it('our own pid counts as alive only for jobs this process holds (a restart may reuse the dead one\'s pid)', () => {
    const job = { id: 3, owner_pid: process.pid, heartbeat_at: beat(0) };
    expect(isAbandoned('analysis', job, NOW)).toBe(true);
    const release = holdJob('analysis', 3);
    expect(isAbandoned('analysis', job, NOW)).toBe(false);
    // Held per kind: import job 3 is another row.
    expect(isAbandoned('import', job, NOW)).toBe(true);
    release();
    expect(isAbandoned('analysis', job, NOW)).toBe(true);
  });
});
