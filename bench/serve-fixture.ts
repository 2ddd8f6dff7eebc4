/**
 * A benchmark server process: either mia on a data folder seeded with N analysed scans (with S
 * instance rows per series: `mia N S`), or a bare Express handler returning a payload of the same size. Prints its URL (and for mia a
 * key) as one JSON line on stdout, then serves until killed. Asked over IPC, it answers with its
 * CPU time so far (process.cpuUsage): CPU per request holds up on a busy machine where req/s
 * does not, and with the garbage collector's pauses and the longest event-loop delay since it was
 * last asked.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PerformanceObserver, monitorEventLoopDelay } from 'node:perf_hooks';
import express from 'express';
import { createServer } from '#server/create-server.ts';
import { seedAnalysedScans } from './seed-results.ts';

const [mode = 'mia', countArg = '1000', slicesArg = '0'] = process.argv.slice(2);

async function mia(scans: number, slices: number): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mia-bench-'));
  // The per-key limit would cap the load generator; the check itself still runs on every request.
  const server = await createServer({ dataDir, rateLimit: { requests: 10_000_000, windowMs: 60_000, authFailures: 1000 } });
  const key = await seedAnalysedScans(server.services.db, scans, { slices });
  const url = await server.listen(0, '127.0.0.1');
  process.stdout.write(JSON.stringify({ url, key }) + '\n');
}

async function bare(payloadBytes: number): Promise<void> {
  const app = express();
  const body = JSON.stringify({ items: 'x'.repeat(Math.max(0, payloadBytes - 20)) });
  app.get('/v1/scan/results', (_req, res) => {
    res.type('application/json').send(body);
  });
  await new Promise<void>((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}`, key: '' }) + '\n');
      resolve();
    });
  });
}

process.once('SIGINT', () => process.exit(0));
// Garbage collection pauses since the last question: a long one stops every request at once, so
// the tail of a latency column is read beside the longest pause of the same run.
let gc = { count: 0, totalMs: 0, maxMs: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gc.count += 1;
    gc.totalMs += entry.duration;
    gc.maxMs = Math.max(gc.maxMs, entry.duration);
  }
}).observe({ entryTypes: ['gc'] });
// The longest the event loop was held since the last question: a stall of every request at once
// that is not the collector's is the server's own synchronous work (or the machine's).
const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();
process.on('message', () => {
  process.send?.({ cpu: process.cpuUsage(), gc, loopMaxMs: loop.max / 1e6 });
  gc = { count: 0, totalMs: 0, maxMs: 0 };
  loop.reset();
});
// The IPC channel must not keep a fixture alive once the bench is gone.
process.channel?.unref();
if (mode === 'bare') await bare(Number(countArg));
else await mia(Number(countArg), Number(slicesArg));
