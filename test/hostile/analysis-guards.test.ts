/**
 * What the analysis queue does with values it did not check at import: an instance row from
 * before the frame checks that claims 2,000,000,000 frames fails its job with the reason
 * instead of building a frame list that exhausts the heap; and a job whose process died under
 * it is resumed once, then failed, never resumed into the same death at every start.
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createServer } from '#server/create-server.ts';
import { MAX_ANALYSIS_SLICES } from '#server/analysis/analysis-queue.ts';
import { CT_SMALL, seedImportedInstance } from '../helpers/image-fixture.ts';
import { sqliteConnection, startTestServer } from '../helpers/server.ts';
import { waitForJob } from '../analysis/analysis-helpers.ts';

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A pid that surely belongs to no process any more. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

describe('frame counts stored before they were checked', () => {
  it('fail the analysis with the reason; the server keeps answering', async () => {
    const t = await startTestServer();
    try {
      const { scanId, instanceUid } = await seedImportedInstance(t, CT_SMALL);
      (await t.server.services.db.run('UPDATE instances SET frames = ? WHERE sop_instance_uid = ?', [2_000_000_000, instanceUid]));
      const reply = await t.request('POST', `/v1/scans/${scanId}/analyses`, { body: {} });
      expect(reply.status, reply.text).toBe(202);
      const job = await waitForJob(t, reply.json.data.id);
      expect(job.status).toBe('failed');
      expect(job.reason).toContain(`scan has 2000000000 frames, more than the ${MAX_ANALYSIS_SLICES} one analysis reads`);
      expect((await t.request('GET', '/v1/auth/me')).status).toBe(200);
    } finally {
      await t.close();
    }
  });
});

describe('a job whose process died under it', () => {
  type Row = { status: string; interruptions: number; error: string | null; scan_status: string };

  async function restartWith(interruptions: number): Promise<Row> {
    const folder = mkdtempSync(join(tmpdir(), 'mia-interrupted-'));
    dirs.push(folder);
    // A folder with one analysis left `running` by a process that no longer exists: made on a
    // test server, copied out (its folder goes with it), then set back to running.
    const first = await startTestServer();
    const seeded = await seedImportedInstance(first, CT_SMALL);
    const reply = await first.request('POST', `/v1/scans/${seeded.scanId}/analyses`, { body: {} });
    await waitForJob(first, reply.json.data.id);
    sqliteConnection(first.server.services.db).exec(`VACUUM INTO '${join(folder, 'mia.sqlite')}'`);
    for (const entry of readdirSync(first.dataDir)) {
      if (!entry.startsWith('mia.sqlite') && entry !== 'logs') cpSync(join(first.dataDir, entry), join(folder, entry), { recursive: true });
    }
    await first.close();
    const db = new BetterSqlite3(join(folder, 'mia.sqlite'));
    db.prepare(`UPDATE analyses SET status = 'running', owner_pid = ?, interruptions = ?, finished_at = NULL, error = NULL WHERE public_id = ?`).run(deadPid(), interruptions, reply.json.data.id);
    db.prepare(`UPDATE scans SET status = 'analyzing' WHERE scan_id = ?`).run(seeded.scanId);
    db.close();

    const server = await createServer({ dataDir: folder });
    try {
      const read = async (): Promise<Row> => {
        const ro = new BetterSqlite3(join(folder, 'mia.sqlite'), { readonly: true });
        try {
          return ro.prepare('SELECT a.status, a.interruptions, a.error, s.status AS scan_status FROM analyses a JOIN scans s ON s.id = a.scan_ref').get() as Row;
        } finally {
          ro.close();
        }
      };
      const until = Date.now() + 30_000;
      let row = await read();
      while ((row.status === 'running' || row.status === 'queued') && Date.now() < until) {
        await new Promise((r) => setTimeout(r, 50));
        row = await read();
      }
      return row;
    } finally {
      await server.close();
    }
  }

  it('is resumed after its first death and runs to its end', async () => {
    const row = await restartWith(0);
    // CT_small is one slice: the model does not apply, which is an end, not a failure.
    expect(row).toMatchObject({ status: 'not_applicable', interruptions: 1 });
  });

  it('is failed with the reason after its second, and its scan says so', async () => {
    const row = await restartWith(1);
    expect(row.status).toBe('failed');
    expect(row.error).toMatch(/stopped unexpectedly 2 times; not resumed again/);
    expect(row.scan_status).toBe('failed');
  });
});
