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
import { createServer } from '#server/create-server.ts';
import { seedAnalysedScans } from '../seed-results.ts';

const { values } = parseArgs({
  options: {
    data: { type: 'string' },
    database: { type: 'string' },
    hub: { type: 'boolean', default: false },
    seed: { type: 'string' },
  },
});
if (!values.data) throw new Error('--data DIR is required');


const server = await createServer({
  dataDir: values.data,
  databaseUrl: values.database ?? null,
  hubMode: values.hub,
  rateLimit: { requests: 10_000_000, windowMs: 60_000, authFailures: 1000 },
});
const key = values.seed === undefined ? '' : await seedAnalysedScans(server.services.db, Number(values.seed));
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
