/**
 * npm run soak -- --minutes N [--seed S] [--postgres]
 *
 * The sync workload (test/sync/workload.test.ts: a hub, three workstations behind fault proxies,
 * verdicts, uploads, report drafts, edits and signings, and the oracle that checks them after the
 * heal) for as long as asked, instead of the 30 s that .ci/run gives it. A different seed is a
 * different sequence of faults and writes; the seed of a failing run reproduces it.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: { minutes: { type: 'string', default: '10' }, seed: { type: 'string' }, postgres: { type: 'boolean', default: false } },
  strict: true,
});
const minutes = Number(values.minutes);
if (!Number.isFinite(minutes) || minutes <= 0 || minutes > 24 * 60) {
  process.stderr.write('soak: --minutes must be a number of minutes, above 0 and at most a day\n');
  process.exit(2);
}
const seed = values.seed ?? String(Date.now() % 1_000_000_007);
if (!/^\d{1,12}$/.test(seed)) {
  process.stderr.write('soak: --seed must be a whole number\n');
  process.exit(2);
}
process.stdout.write(`soak: ${minutes} min of workload on ${values.postgres ? 'a PostgreSQL' : 'a SQLite'} hub, seed ${seed}\n`);
const run = spawnSync(
  join(import.meta.dirname, '..', 'node_modules', '.bin', 'vitest'),
  ['run', '--project', values.postgres ? 'sync-postgres' : 'sync', 'test/sync/workload.test.ts'],
  { stdio: 'inherit', env: { ...process.env, MIA_SOAK_MS: String(Math.round(minutes * 60_000)), MIA_SOAK_SEED: seed } },
);
if (run.status !== 0) process.stdout.write(`soak: failed; run it again with --seed ${seed} to see the same workload\n`);
process.exit(run.status ?? 1);
