/**
 * GET /v1/scan/results with 1,000 analysed scans stored, 50 concurrent clients on loopback,
 * side by side with a bare Express handler returning a body of the same size, in one run.
 * Servers run in their own processes so the load generator does not share their event loop.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import autocannon from 'autocannon';
import { firstLine } from './child-line.ts';

const FIXTURE = join(import.meta.dirname, 'serve-fixture.ts');
const CONNECTIONS = 50;
const DURATION_S = 10;

type Started = { url: string; key: string; child: ChildProcess };
type Row = { name: string; rps: number; p50: number; p99: number; bytes: number; failed: number; timeouts: number };

async function start(args: string[]): Promise<Started> {
  const child = spawn(process.execPath, ['--import', 'tsx', FIXTURE, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await firstLine(child, 'fixture');
  const { url, key } = JSON.parse(line) as { url: string; key: string };
  return { url, key, child };
}

async function load(name: string, url: string, key: string): Promise<Row> {
  const result = await autocannon({
    url,
    connections: CONNECTIONS,
    duration: DURATION_S,
    headers: key ? { Authorization: `Bearer ${key}` } : {},
  });
  return {
    name,
    rps: Math.round(result.requests.average),
    p50: result.latency.p50,
    p99: result.latency.p99,
    bytes: Math.round(result.throughput.average / Math.max(1, result.requests.average)),
    failed: result.non2xx + result.errors - result.timeouts,
    timeouts: result.timeouts,
  };
}

export async function run(): Promise<string> {
  const miaServer = await start(['mia', '1000']);
  const rows: Row[] = [];
  let payload = 0;
  try {
    const probe = await fetch(`${miaServer.url}/v1/scan/results`, { headers: { Authorization: `Bearer ${miaServer.key}` } });
    payload = (await probe.text()).length;
    rows.push(await load('mia GET /v1/scan/results (limit 50)', `${miaServer.url}/v1/scan/results`, miaServer.key));
    rows.push(await load('mia GET /v1/scan/results?limit=500', `${miaServer.url}/v1/scan/results?limit=500`, miaServer.key));
    rows.push(await load('mia GET /v1/scan/results?format=csv', `${miaServer.url}/v1/scan/results?format=csv`, miaServer.key));
  } finally {
    miaServer.child.kill();
  }
  const bareServer = await start(['bare', String(payload)]);
  try {
    rows.unshift(await load(`bare Express handler (${payload} B body)`, `${bareServer.url}/v1/scan/results`, ''));
  } finally {
    bareServer.child.kill();
  }
  const baseline = rows[0]?.rps ?? 1;
  const table = rows
    .map((r) => `| ${r.name} | ${r.rps} | ${(r.rps / baseline).toFixed(2)}x | ${r.p50} | ${r.p99} | ${r.bytes} | ${r.failed} | ${r.timeouts} |`)
    .join('\n');
  return `## HTTP API

GET /v1/scan/results with 1,000 analysed scans stored (0-2 findings each), ${CONNECTIONS} concurrent
connections on loopback for ${DURATION_S} s each (autocannon), servers in their own processes,
Node ${process.version}, ${new Date().toISOString().slice(0, 10)}. Every mia request is authenticated,
rate-limit checked, audited (one SQLite insert) and logged.

| endpoint | req/s | vs bare | p50 ms | p99 ms | bytes/resp | failed | over 10 s |
|---|---|---|---|---|---|---|---|
${table}

"failed" counts non-2xx answers and connection errors; "over 10 s" requests autocannon gave up on.
One process serves requests one at a time (SQLite reads are synchronous), so 50 clients each
asking for 500 results queue behind each other: the tail latency of that row is queueing, not work.

Reproduce: \`npm run bench -- api\`.
`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.stdout.write(await run());
