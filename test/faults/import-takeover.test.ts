/**
 * A `mia import` killed while a server runs on the same data folder: the server takes the job
 * over, as it would at its next start, and finishes it from its checkpoint. Before, the job
 * showed `running` until the server restarted, its event stream never ended and automatic
 * analyses waited behind it.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { followJob, makePhantoms } from '../imports/helpers.ts';
import { killWhen, readCount, spawnMia } from '../helpers/kill.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const SERIES = 2;
const SLICES = 120;
const TOTAL = SERIES * SLICES;

const work = mkdtempSync(join(tmpdir(), 'mia-takeover-'));
const corpus = join(work, 'corpus');
let t: TestServer;

beforeAll(async () => {
  makePhantoms(corpus, { series: SERIES, seed: 31, size: 64, slices: SLICES });
  t = await startTestServer({ importTakeoverMs: 200 });
});
afterAll(async () => {
  await t.close();
  rmSync(work, { recursive: true, force: true });
});

type Job = { id: string; status: string; counts: { imported: number } };

describe('an import whose process was killed while a server runs', () => {
  it('is taken over by the server and completed, its event stream ending with done', async () => {
    const run = spawnMia(['import', corpus], t.dataDir);
    const committed = await killWhen(
      run.child,
      () => readCount(t.dataDir, 'SELECT COUNT(*) FROM instances'),
      (n) => n >= 40 && n <= TOTAL - 60,
      `40 instances committed (output: ${run.output()})`,
    );
    expect(committed, 'the kill landed mid-import').toBeDefined();
    const jobs = (await t.request('GET', '/v1/imports')).json.data.items as Job[];
    expect(jobs).toHaveLength(1);
    // Followed as the UI does: the stream ends once the server has finished the job.
    const events = await followJob(t, jobs[0]!.id);
    expect(events.at(-1)).toMatchObject({ event: 'done', data: { status: 'completed' } });
    const job = (await t.request('GET', `/v1/imports/${jobs[0]!.id}`)).json.data as Job;
    expect(job.status).toBe('completed');
    expect(readCount(t.dataDir, 'SELECT COUNT(*) FROM instances')).toBe(TOTAL);
  });
});
