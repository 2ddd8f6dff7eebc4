/**
 * One mia server process for bench/hub.bench.ts, started the way `mia serve [--hub]` starts one
 * but with a rate limit the load generator cannot reach (the CLI has no flag for it; the check
 * still runs on every request):
 *
 *   node --import tsx bench/hub/node.ts --data DIR [--database postgres://...] [--hub] [--seed N]
 *
 * --seed stores N analysed scans (the same ones as bench/serve-fixture.ts) and an admin key
 * before listening. Prints one JSON line {url, key, pid} on stdout, then serves until SIGTERM.
 */
import { parseArgs } from 'node:util';
import { issueKeyForUser } from '#server/auth/api-keys.ts';
import { systemClock } from '#server/clock.ts';
import { createServer } from '#server/create-server.ts';
import { insertCompletedAnalysis } from '#server/store/analyses.ts';
import { upsertPatient, upsertScan, upsertStudy } from '#server/store/archive-index.ts';
import { inTransaction, type Database } from '#server/store/database.ts';
import { findOrCreateUser } from '#server/users/users.ts';

const { values } = parseArgs({
  options: {
    data: { type: 'string' },
    database: { type: 'string' },
    hub: { type: 'boolean', default: false },
    seed: { type: 'string' },
  },
});
if (!values.data) throw new Error('--data DIR is required');

/** The analysed scans of bench/serve-fixture.ts: 1,000 by default, 0-2 findings each. */
async function seed(db: Database, scans: number): Promise<string> {
  const at = new Date().toISOString();
  await inTransaction(db, async (tx) => {
    for (let i = 0; i < scans; i += 1) {
      const patientRef = await upsertPatient(tx, { patientId: `BENCH-${i % 300}`, name: null, birthDate: null, sex: null }, at);
      const studyRef = await upsertStudy(tx, patientRef, { studyUid: `1.2.826.0.1.9.${i}`, studyDate: '20260301', studyTime: null, description: 'Head', accessionNumber: null }, at);
      const scanRef = await upsertScan(tx, studyRef, { scanId: `1.2.826.0.1.9.${i}.1`, modality: i % 2 ? 'CT' : 'MR', bodyPart: 'HEAD', description: null, seriesNumber: 1 }, at);
      await insertCompletedAnalysis(tx, {
        scanRef,
        model: { id: 'mia-phantom-detector', name: 'mia phantom detector', version: '1.0.0', sha256: 'ab'.repeat(32) },
        thresholds: { tumor_detected: 0.5 },
        recommendation: 'Follow-up MRI in 3 months.',
        findings: Array.from({ length: i % 3 }, (_, f) => ({
          label: 'tumor_detected',
          confidence: 0.6 + f / 10,
          x: 10,
          y: 20,
          width: 30,
          height: 40,
          instanceUid: `1.2.826.0.1.9.${i}.1.${f}`,
          frame: 0,
        })),
        startedAt: at,
        finishedAt: at,
      });
    }
  });
  const { user } = await findOrCreateUser({ db, clock: systemClock }, { email: 'bench@bench.local', role: 'admin' });
  const { key } = await issueKeyForUser({ db, clock: systemClock }, { userRef: user.id, name: 'bench', extraScopes: [] });
  return key;
}

const server = await createServer({
  dataDir: values.data,
  databaseUrl: values.database ?? null,
  hubMode: values.hub,
  rateLimit: { requests: 10_000_000, windowMs: 60_000, authFailures: 1000 },
});
const key = values.seed === undefined ? '' : await seed(server.services.db, Number(values.seed));
const url = await server.listen(0, '127.0.0.1');

let closing = false;
const stop = (): void => {
  if (closing) return;
  closing = true;
  void server.close().finally(() => process.exit(0));
};
process.once('SIGTERM', stop);
process.once('SIGINT', stop);
process.stdout.write(JSON.stringify({ url, key, pid: process.pid }) + '\n');
