/** The server's one runtime: parts start in one order and stop in the reverse, once (server/runtime.ts). */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime } from '#server/runtime.ts';
import { findAnalysisJobById } from '#server/store/analysis-jobs.ts';
import { seedScan } from '../helpers/seed.ts';
import { sqliteConnection } from '../helpers/server.ts';

const dirs: string[] = [];
const dataDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'mia-runtime-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('runtime', () => {
  it('stops the queue before the listener, and closes the database only after the listener drained', async () => {
    const runtime = await createRuntime({ dataDir: dataDir() });
    expect(runtime.state()).toBe('created');
    await runtime.start();
    expect(runtime.state()).toBe('running');
    const seen: string[] = [];
    runtime.attachListener(async () => {
      // In-flight requests finish their writes here: the database must still be open, and no
      // analysis may start any more.
      seen.push(`listener: db open ${sqliteConnection(runtime.db).open}, state ${runtime.state()}`);
    });
    const first = runtime.stop();
    const second = runtime.stop();
    expect(second).toBe(first);
    await first;
    expect(seen).toEqual(['listener: db open true, state stopping']);
    expect(sqliteConnection(runtime.db).open).toBe(false);
    expect(runtime.state()).toBe('stopped');
  });

  it('a quiesced queue takes no job: one queued during shutdown stays queued for the next start', async () => {
    const dir = dataDir();
    const runtime = await createRuntime({ dataDir: dir });
    await runtime.start();
    await runtime.quiesce();
    const scan = await seedScan(runtime.db);
    const job = await runtime.analyses.enqueue(scan.scanId, { requestedBy: 'test' });
    // A pump on the next turn would have claimed it; the stopped queue does not.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect((await findAnalysisJobById(runtime.db, job.id))?.status).toBe('queued');
    await runtime.stop();
  });

  it('a CLI runtime (no background work) starts and closes its parts cleanly', async () => {
    const runtime = await createRuntime({ dataDir: dataDir() }, { background: false });
    await runtime.start();
    expect(runtime.state()).toBe('running');
    await runtime.stop();
    expect(sqliteConnection(runtime.db).open).toBe(false);
  });
});
