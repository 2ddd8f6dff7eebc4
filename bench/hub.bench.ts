/**
 * The hub under load, in one run: (a) mia on SQLite, one process; (b) one `serve --hub` node on
 * PostgreSQL (durable settings); (c) three such nodes on the same database and data folder
 * behind haproxy (leastconn); (d) bare Express (a body of the same size for GET, read the body
 * and answer 201 for POST). GET /v1/scan/results (limit 50 and 500) over the same 1,000 analysed
 * scans, and POST /v1/instances of distinct real DICOM instances, 50 connections, 10 s a run
 * measured after a 1 s lead-in on the same connections.
 * Configurations alternate within each round (round 2 in reverse order); every process's CPU
 * time is read from /proc before and after each run. Runnable alone:
 * `node --import tsx bench/hub.bench.ts`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { availableParallelism, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import autocannon from 'autocannon';
import { cpuSeconds, machineSeconds } from './hub/cpu.ts';
import { instance, loadTemplate, SERIES, STUDIES, type Template } from './hub/dicom.ts';
import { BALANCE, startHaproxy, type Haproxy } from './hub/haproxy.ts';
import { postmasterPid, startDurableCluster, type BenchCluster } from './hub/postgres.ts';
import { firstLine } from './child-line.ts';
import { setAside } from './set-aside.ts';

const NODE = join(import.meta.dirname, 'hub', 'node.ts');
const BARE = join(import.meta.dirname, 'hub', 'bare.ts');
const CONNECTIONS = 50;
// Shorter runs for trying the bench out: MIA_HUB_BENCH_SECONDS=2 MIA_HUB_BENCH_ROUNDS=1.
const DURATION_S = Number(process.env['MIA_HUB_BENCH_SECONDS'] ?? 10);
const WARMUP_S = 2;
/** The first second of every run, on its own connections, before measuring (see load()). */
const LEAD_IN_S = 1;
const ROUNDS = Number(process.env['MIA_HUB_BENCH_ROUNDS'] ?? 2);
const SCANS = 1000;
/** Before a run, the bench's servers must be quiet: requests a run abandoned are still being answered. */
const SETTLE_MAX_S = 30;

type TargetId = 'bare' | 'sqlite' | 'pg1' | 'pg3';
type EndpointId = 'get50' | 'get500' | 'post';
type Server = { name: string; url: string; key: string; pid: number; child: ChildProcess; stderr: () => string };
type Target = { id: TargetId; label: string; url: string; key: string };
/** CPU seconds per group of processes over one run. */
type Cpu = Record<string, number>;
type Run = {
  target: TargetId;
  endpoint: EndpointId;
  round: number;
  seconds: number;
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  imported: number;
  latencies: number[];
  /** Answers to requests sent in the run's lead-in, while autocannon's connections open. */
  leadIn: { requests: number; over1s: number; max: number };
  codes: Map<number, number>;
  sampleError: string | null;
  cpu: Cpu;
};

const TARGETS: Record<TargetId, string> = {
  bare: '(d) bare Express',
  sqlite: '(a) mia, SQLite, 1 process',
  pg1: '(b) mia --hub, PostgreSQL, 1 node',
  pg3: '(c) mia --hub, PostgreSQL, 3 nodes + haproxy',
};
const ENDPOINTS: Record<EndpointId, { label: string; path: string; post: boolean }> = {
  get50: { label: 'GET /v1/scan/results (limit 50)', path: '/v1/scan/results', post: false },
  get500: { label: 'GET /v1/scan/results?limit=500', path: '/v1/scan/results?limit=500', post: false },
  post: { label: 'POST /v1/instances (application/dicom)', path: '/v1/instances', post: true },
};

const children = new Set<ChildProcess>();

async function startServer(name: string, script: string, args: string[]): Promise<Server> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-8000);
  });
  const line = await firstLine(child, name, () => stderr);
  const { url, key, pid } = JSON.parse(line) as { url: string; key: string; pid: number };
  return { name, url, key, pid, child, stderr: () => stderr };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
  await exited;
  clearTimeout(timer);
}

/** The processes whose CPU time is read around every run. */
type Probe = { group: string; read: () => number };

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const ms = (value: number): string => (Number.isNaN(value) ? '-' : value < 10 ? value.toFixed(1) : String(Math.round(value)));

let nextInstance = 0;

const sleep = (millis: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, millis));

/** Waits until the given processes use under 0.2 cores over half a second; returns the seconds waited. */
async function settle(probes: readonly Probe[], groups: readonly string[]): Promise<number> {
  const started = performance.now();
  const read = (): number => probes.filter((p) => groups.includes(p.group)).reduce((total, p) => total + p.read(), 0);
  let last = read();
  do {
    await sleep(500);
    const now = read();
    if (now - last < 0.1) break;
    last = now;
  } while (performance.now() - started < SETTLE_MAX_S * 1000);
  return (performance.now() - started) / 1000;
}

/**
 * One run: LEAD_IN_S on the run's own connections, then `seconds` measured on them. autocannon
 * opens all its connections at once; on this 2-core machine, with the load generator beside a
 * saturated server, some handshakes were seen to complete one per server iteration (up to 0.5 s
 * late) in some runs and not in others, while a plain socket client that opened 50 connections
 * never saw it. Requests sent in the lead-in are reported apart (`leadIn`), not dropped.
 */
async function load(target: Target, endpoint: EndpointId, round: number, seconds: number, template: Template, probes: readonly Probe[], leadInS = LEAD_IN_S): Promise<Run> {
  const spec = ENDPOINTS[endpoint];
  const latencies: number[] = [];
  const codes = new Map<number, number>();
  const leadIn = { requests: 0, over1s: 0, max: 0 };
  let imported = 0;
  let measuring = leadInS === 0;
  let sampleError: string | null = null;
  const headers: Record<string, string> = target.key ? { Authorization: `Bearer ${target.key}` } : {};
  const options: autocannon.Options = {
    url: `${target.url}${spec.path}`,
    connections: CONNECTIONS,
    duration: leadInS + seconds,
    timeout: 10,
    headers: spec.post ? { ...headers, 'Content-Type': 'application/dicom' } : headers,
  };
  if (spec.post) {
    options.method = 'POST';
    options.requests = [
      {
        method: 'POST',
        setupRequest: (request) => ({ ...request, body: instance(template, nextInstance++) }),
        onResponse: (status, body) => {
          if (status >= 200 && status < 300) {
            if (measuring && body.includes('"imported":1')) imported += 1;
          } else {
            sampleError ??= `${status} ${body.slice(0, 600)}`;
          }
        },
      },
    ];
  }
  let cpuBefore = probes.map((p) => p.read());
  let measuredFrom = performance.now();
  const runStarted = measuredFrom;
  const startMeasuring = setTimeout(() => {
    cpuBefore = probes.map((p) => p.read());
    measuredFrom = performance.now();
    measuring = true;
  }, leadInS * 1000);
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const run = autocannon(options, (error: unknown, done: autocannon.Result) => (error ? reject(error instanceof Error ? error : new Error(String(error))) : resolve(done)));
    // The typings omit the client argument autocannon passes first.
    (run as unknown as NodeJS.EventEmitter).on('response', (_client: unknown, status: number, _bytes: number, time: number) => {
      const sentAt = performance.now() - time - runStarted;
      if (sentAt < leadInS * 1000) {
        leadIn.requests += 1;
        if (time > 1000) leadIn.over1s += 1;
        leadIn.max = Math.max(leadIn.max, time);
      } else {
        latencies.push(time);
      }
      if (measuring) codes.set(status, (codes.get(status) ?? 0) + 1);
    });
    run.on('reqError', (error: unknown) => {
      sampleError ??= error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    });
  }).finally(() => clearTimeout(startMeasuring));
  const measuredSeconds = (performance.now() - measuredFrom) / 1000;
  const cpuAfter = probes.map((p) => p.read());
  const cpu: Cpu = {};
  probes.forEach((p, i) => {
    cpu[p.group] = (cpu[p.group] ?? 0) + (cpuAfter[i]! - cpuBefore[i]!);
  });
  latencies.sort((a, b) => a - b);
  let ok = 0;
  let non2xx = 0;
  for (const [code, n] of codes) {
    if (code >= 200 && code < 300) ok += n;
    else non2xx += n;
  }
  return {
    target: target.id,
    endpoint,
    round,
    seconds: measuredSeconds,
    ok,
    non2xx,
    errors: result.errors - result.timeouts,
    timeouts: result.timeouts,
    imported,
    latencies,
    leadIn,
    codes,
    sampleError,
    cpu,
  };
}

function cpuModel(): string {
  const line = readFileSync('/proc/cpuinfo', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('model name'));
  return line ? line.replace(/^model name\s*:\s*/, '').trim() : 'unknown CPU';
}

/** The entries of a data folder's mia.log and its rotated files. */
function logEntries(dataDir: string): Record<string, unknown>[] {
  const entries: Record<string, unknown>[] = [];
  for (const name of ['mia.log', ...[1, 2, 3, 4, 5].map((n) => `mia.log.${n}`)]) {
    const file = join(dataDir, 'logs', name);
    if (!existsSync(file)) continue;
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      try {
        if (line) entries.push(JSON.parse(line) as Record<string, unknown>);
      } catch {
        // A line cut by rotation.
      }
    }
  }
  return entries;
}

/** The longest time mia logged for a GET /v1/scan/results (from when Express saw the request). */
function longestLoggedGet(dataDir: string): number {
  let longest = 0;
  for (const entry of logEntries(dataDir)) {
    if (entry['event'] === 'request' && entry['route'] === 'GET /v1/scan/results' && typeof entry['ms'] === 'number') longest = Math.max(longest, entry['ms']);
  }
  return longest;
}

/** Distinct error lines of a mia log (event and error fields), most frequent first. */
function logErrors(dataDir: string): string[] {
  const counts = new Map<string, number>();
  for (const entry of logEntries(dataDir)) {
    const status = typeof entry['status'] === 'number' ? entry['status'] : 0;
    if (entry['level'] !== 'error' && entry['level'] !== 'warn' && status < 400) continue;
    const { at: _at, request_id: _id, ms: _ms, key_id: _key, job_id: _job, ...rest } = entry;
    const text = JSON.stringify(rest);
    counts.set(text, (counts.get(text) ?? 0) + 1);
  }
  return [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([text, n]) => `${n} x ${text}`);
}

export async function run(): Promise<string> {
  const benchStarted = performance.now();
  const work = mkdtempSync(join(tmpdir(), 'mia-hub-bench-'));
  let cluster: BenchCluster | undefined;
  let proxy: Haproxy | undefined;
  // Ctrl-C: stop what was started (the cluster's own exit handler stops PostgreSQL).
  const interrupted = (): void => {
    for (const child of children) child.kill('SIGKILL');
    proxy?.child.kill('SIGKILL');
    setAside(work);
    process.exit(130);
  };
  process.once('SIGINT', interrupted);
  process.once('SIGTERM', interrupted);
  try {
    const log = (text: string): void => void process.stderr.write(`hub: ${text}\n`);
    const template = loadTemplate();

    log('starting PostgreSQL (fsync, synchronous_commit, full_page_writes on)');
    cluster = await startDurableCluster();
    const databaseUrl = await cluster.createDatabase('mia_hub_bench');
    const postmaster = await postmasterPid(cluster.superuserUrl);

    const sqliteDir = join(work, 'sqlite');
    const hubDir = join(work, 'hub');
    mkdirSync(sqliteDir);
    mkdirSync(hubDir);
    log(`seeding ${SCANS} analysed scans: SQLite, then PostgreSQL`);
    let seedStarted = performance.now();
    const sqlite = await startServer('mia SQLite', NODE, ['--data', sqliteDir, '--seed', String(SCANS)]);
    const sqliteSeedS = (performance.now() - seedStarted) / 1000;
    seedStarted = performance.now();
    const node1 = await startServer('hub node 1', NODE, ['--data', hubDir, '--database', databaseUrl, '--hub', '--seed', String(SCANS)]);
    const pgSeedS = (performance.now() - seedStarted) / 1000;
    const node2 = await startServer('hub node 2', NODE, ['--data', hubDir, '--database', databaseUrl, '--hub']);
    const node3 = await startServer('hub node 3', NODE, ['--data', hubDir, '--database', databaseUrl, '--hub']);
    proxy = await startHaproxy(work, [node1.url, node2.url, node3.url]);

    // The bare handler answers bodies of the sizes mia's answers have.
    const size = async (url: string, key: string): Promise<number> => {
      const reply = await fetch(url, { headers: { Authorization: `Bearer ${key}` } });
      if (!reply.ok) throw new Error(`${url}: ${reply.status} ${await reply.text()}`);
      return (await reply.arrayBuffer()).byteLength;
    };
    const sizes = {
      get50: await size(`${sqlite.url}/v1/scan/results`, sqlite.key),
      get500: await size(`${sqlite.url}/v1/scan/results?limit=500`, sqlite.key),
      pg50: await size(`${proxy.url}/v1/scan/results`, node1.key),
      pg500: await size(`${proxy.url}/v1/scan/results?limit=500`, node1.key),
    };
    const bare = await startServer('bare Express', BARE, ['--small', String(sizes.get50), '--large', String(sizes.get500)]);

    const targets: Target[] = [
      { id: 'bare', label: TARGETS.bare, url: bare.url, key: '' },
      { id: 'sqlite', label: TARGETS.sqlite, url: sqlite.url, key: sqlite.key },
      { id: 'pg1', label: TARGETS.pg1, url: node1.url, key: node1.key },
      { id: 'pg3', label: TARGETS.pg3, url: proxy.url, key: node1.key },
    ];
    const haproxyPid = proxy.child.pid ?? 0;
    const selfCpu = (): number => {
      const usage = process.cpuUsage();
      return (usage.user + usage.system) / 1e6;
    };
    const probes: Probe[] = [
      { group: 'loadgen', read: selfCpu },
      { group: 'bare', read: () => cpuSeconds(bare.pid) },
      { group: 'sqlite', read: () => cpuSeconds(sqlite.pid) },
      { group: 'node1', read: () => cpuSeconds(node1.pid) },
      { group: 'node2', read: () => cpuSeconds(node2.pid) },
      { group: 'node3', read: () => cpuSeconds(node3.pid) },
      { group: 'postgres', read: () => cpuSeconds(postmaster, true) },
      { group: 'haproxy', read: () => cpuSeconds(haproxyPid) },
      { group: 'machineBusy', read: () => machineSeconds().busy },
      { group: 'machineIrq', read: () => machineSeconds().irq },
      { group: 'machineIdle', read: () => machineSeconds().idle },
      { group: 'machineSteal', read: () => machineSeconds().steal },
    ];

    const proxiedBefore = await proxy.stats();

    const runs: Run[] = [];
    const settled: number[] = [];
    const serverProbes = ['bare', 'sqlite', 'node1', 'node2', 'node3', 'postgres', 'haproxy'];
    // GET rounds first: POSTs add scans, and every GET run should see the same 1,000. Each phase
    // starts with a short warm-up of every configuration (JIT, prepared statements, pools).
    for (const endpoints of [['get50', 'get500'], ['post']] as const) {
      log(`warm-up: ${WARMUP_S} s of ${endpoints.join(', ')} per configuration`);
      for (const target of targets) {
        for (const endpoint of endpoints) await load(target, endpoint, 0, WARMUP_S, template, probes, 0);
      }
      for (let round = 1; round <= ROUNDS; round++) {
        const order = round % 2 === 1 ? targets : [...targets].reverse();
        for (const endpoint of endpoints) {
          for (const target of order) {
            settled.push(await settle(probes, serverProbes));
            log(`round ${round}: ${ENDPOINTS[endpoint].label} -> ${target.label}`);
            const done = await load(target, endpoint, round, DURATION_S, template, probes);
            runs.push(done);
            log(`  ${Math.round(done.ok / done.seconds)} req/s, non-2xx ${done.non2xx}, errors ${done.errors}, timeouts ${done.timeouts}${done.sampleError ? `, e.g. ${done.sampleError.slice(0, 200)}` : ''}`);
          }
        }
      }
    }
    const proxiedAfter = await proxy.stats();
    const benchSeconds = (performance.now() - benchStarted) / 1000;
    return report({
      runs,
      template,
      cluster,
      haproxyVersion: proxy.version,
      sizes,
      seeds: { sqlite: sqliteSeedS, pg: pgSeedS },
      spread: [...proxiedAfter.entries()].map(([name, n]) => `${name} ${n - (proxiedBefore.get(name) ?? 0)}`),
      logErrors: { sqlite: logErrors(sqliteDir), hub: logErrors(hubDir) },
      longestGet: { sqlite: longestLoggedGet(sqliteDir), hub: longestLoggedGet(hubDir) },
      benchSeconds,
      settled,
    });
  } finally {
    process.removeListener('SIGINT', interrupted);
    process.removeListener('SIGTERM', interrupted);
    await Promise.all([...children].map((child) => stopChild(child)));
    if (proxy) await stopChild(proxy.child);
    await cluster?.stop();
    setAside(work);
  }
}

type Report = {
  runs: Run[];
  template: Template;
  cluster: BenchCluster;
  haproxyVersion: string;
  sizes: { get50: number; get500: number; pg50: number; pg500: number };
  seeds: { sqlite: number; pg: number };
  spread: string[];
  logErrors: { sqlite: string[]; hub: string[] };
  longestGet: { sqlite: number; hub: number };
  benchSeconds: number;
  settled: number[];
};

type Row = { rps: number; rounds: number[]; p50: number; p99: number; max: number; over1s: number; leadIn: { requests: number; over1s: number; max: number }; non2xx: number; errors: number; timeouts: number; imported: number; requests: number; seconds: number; cpu: Cpu; sampleError: string | null; codes: Map<number, number> };

function combine(runs: readonly Run[]): Row {
  const latencies = runs.flatMap((r) => r.latencies).sort((a, b) => a - b);
  const seconds = runs.reduce((s, r) => s + r.seconds, 0);
  const ok = runs.reduce((s, r) => s + r.ok, 0);
  const cpu: Cpu = {};
  const codes = new Map<number, number>();
  for (const r of runs) {
    for (const [group, value] of Object.entries(r.cpu)) cpu[group] = (cpu[group] ?? 0) + value;
    for (const [code, n] of r.codes) codes.set(code, (codes.get(code) ?? 0) + n);
  }
  return {
    rps: ok / seconds,
    rounds: runs.map((r) => r.ok / r.seconds),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    max: latencies.at(-1) ?? Number.NaN,
    over1s: latencies.filter((l) => l > 1000).length,
    leadIn: {
      requests: runs.reduce((s, r) => s + r.leadIn.requests, 0),
      over1s: runs.reduce((s, r) => s + r.leadIn.over1s, 0),
      max: Math.max(0, ...runs.map((r) => r.leadIn.max)),
    },
    non2xx: runs.reduce((s, r) => s + r.non2xx, 0),
    errors: runs.reduce((s, r) => s + r.errors, 0),
    timeouts: runs.reduce((s, r) => s + r.timeouts, 0),
    imported: runs.reduce((s, r) => s + r.imported, 0),
    requests: latencies.length,
    seconds,
    cpu,
    sampleError: runs.find((r) => r.sampleError)?.sampleError ?? null,
    codes,
  };
}

const cores = (seconds: number | undefined, wall: number): string => ((seconds ?? 0) / wall).toFixed(2);

function report(r: Report): string {
  const rows = new Map<string, Row>();
  for (const endpoint of Object.keys(ENDPOINTS) as EndpointId[]) {
    for (const target of Object.keys(TARGETS) as TargetId[]) {
      const runs = r.runs.filter((x) => x.target === target && x.endpoint === endpoint);
      if (runs.length > 0) rows.set(`${endpoint}/${target}`, combine(runs));
    }
  }
  const row = (endpoint: EndpointId, target: TargetId): Row => rows.get(`${endpoint}/${target}`)!;

  const results = (Object.keys(ENDPOINTS) as EndpointId[])
    .flatMap((endpoint) =>
      (Object.keys(TARGETS) as TargetId[]).map((target) => {
        const x = row(endpoint, target);
        const bare = row(endpoint, 'bare');
        const imported = ENDPOINTS[endpoint].post && target !== 'bare' ? String(x.imported) : '-';
        return `| ${ENDPOINTS[endpoint].label} | ${TARGETS[target]} | ${Math.round(x.rps)} | ${x.rounds.map((v) => Math.round(v)).join(' / ')} | ${(x.rps / bare.rps).toFixed(2)}x | ${ms(x.p50)} | ${ms(x.p99)} | ${ms(x.max)} | ${x.over1s} | ${x.non2xx} | ${x.errors + x.timeouts} | ${imported} |`;
      }),
    )
    .join('\n');

  const efficiency = (Object.keys(ENDPOINTS) as EndpointId[])
    .map((endpoint) => {
      const one = row(endpoint, 'pg1').rps;
      const three = row(endpoint, 'pg3').rps;
      const sqlite = row(endpoint, 'sqlite').rps;
      const ratio = (value: number, digits: number, unit = ''): string => (one > 0 ? `${value.toFixed(digits)}${unit}` : '- (1 node answered nothing)');
      return `| ${ENDPOINTS[endpoint].label} | ${Math.round(sqlite)} | ${Math.round(one)} | ${Math.round(three)} | ${ratio(three / one, 2, 'x')} | ${ratio(three / (3 * one), 2)} |`;
    })
    .join('\n');

  // The processes each configuration answers with; the rest of the bench's servers wait meanwhile.
  const serverGroups: Record<TargetId, string[]> = { bare: ['bare'], sqlite: ['sqlite'], pg1: ['node1'], pg3: ['node1', 'node2', 'node3'] };
  const usedGroups: Record<TargetId, string[]> = { bare: ['bare'], sqlite: ['sqlite'], pg1: ['node1', 'postgres'], pg3: ['node1', 'node2', 'node3', 'postgres', 'haproxy'] };
  const benchGroups = ['bare', 'sqlite', 'node1', 'node2', 'node3', 'postgres', 'haproxy'];
  const sum = (c: Cpu, groups: readonly string[]): number => groups.reduce((total, g) => total + (c[g] ?? 0), 0);
  /** The machine's busy time that is neither this bench's processes nor interrupts: other processes. */
  const otherProcesses = (c: Cpu): number => Math.max(0, (c['machineBusy'] ?? 0) - (c['machineIrq'] ?? 0) - (c['loadgen'] ?? 0) - sum(c, benchGroups));
  const otherHost: number[] = [];
  const cpuRows = (Object.keys(ENDPOINTS) as EndpointId[])
    .flatMap((endpoint) =>
      (Object.keys(TARGETS) as TargetId[]).map((target) => {
        const x = row(endpoint, target);
        const c = x.cpu;
        const wall = x.seconds;
        const servers = serverGroups[target];
        const used = usedGroups[target];
        const waiting = sum(c, benchGroups.filter((g) => !used.includes(g)));
        const others = otherProcesses(c);
        otherHost.push(others / wall);
        const split = servers.length > 1 ? ` (${servers.map((g) => cores(c[g], wall)).join(' + ')})` : '';
        const perRequest = (sum(c, used) / Math.max(1, x.requests)) * 1000;
        return `| ${ENDPOINTS[endpoint].label} | ${TARGETS[target]} | ${cores(c['loadgen'], wall)} | ${cores(sum(c, servers), wall)}${split} | ${used.includes('postgres') ? cores(c['postgres'], wall) : '-'} | ${used.includes('haproxy') ? cores(c['haproxy'], wall) : '-'} | ${cores(waiting, wall)} | ${cores(c['machineIrq'], wall)} | ${cores(others, wall)} | ${cores(c['machineIdle'], wall)} | ${perRequest.toFixed(2)} |`;
      }),
    )
    .join('\n');

  /** Where the cores went in one configuration's runs of an endpoint. */
  const breakdown = (endpoint: EndpointId, target: TargetId): string => {
    const x = row(endpoint, target);
    const c = x.cpu;
    const w = x.seconds;
    const parts = [`mia ${cores(sum(c, serverGroups[target]), w)}`, `PostgreSQL ${cores(c['postgres'], w)}`];
    if (target === 'pg3') parts.push(`haproxy ${cores(c['haproxy'], w)}`);
    parts.push(`autocannon ${cores(c['loadgen'], w)}`, `interrupts ${cores(c['machineIrq'], w)}`, `other processes ${cores(otherProcesses(c), w)}`, `idle ${cores(c['machineIdle'], w)}`);
    return parts.join(', ');
  };
  const idleOnOneNode = Math.max(...(Object.keys(ENDPOINTS) as EndpointId[]).map((e) => (row(e, 'pg1').cpu['machineIdle'] ?? 0) / row(e, 'pg1').seconds));
  const perReq = (endpoint: EndpointId, target: TargetId): string => {
    const x = row(endpoint, target);
    return ((sum(x.cpu, usedGroups[target]) / Math.max(1, x.requests)) * 1000).toFixed(2);
  };
  const otherMean = otherHost.reduce((s, v) => s + v, 0) / Math.max(1, otherHost.length);
  const stolen = r.runs.reduce((total, x) => total + (x.cpu['machineSteal'] ?? 0), 0) / Math.max(1, r.runs.reduce((total, x) => total + x.seconds, 0));
  const otherMax = Math.max(...otherHost);
  // An upload cut off mid-body when autocannon closes its connections at the end of a run.
  const logLine = (where: string, line: string): string => {
    const note = line.includes('POST /v1/instances') && line.includes('ECONNRESET') ? ` (uploads cut off when autocannon closed its ${CONNECTIONS} connections at the end of a run)` : '';
    return `- ${where} log: \`${line.replaceAll('`', "'").slice(0, 500)}\`${note}`;
  };
  const errorLines = [...r.logErrors.sqlite.map((l) => logLine('SQLite node', l)), ...r.logErrors.hub.map((l) => logLine('hub nodes', l))].slice(0, 8);
  const failures = [...rows.entries()].filter(([, x]) => x.non2xx + x.errors + x.timeouts > 0);
  const failureText =
    failures.length === 0 && errorLines.length === 0
      ? 'No request failed and the nodes logged no errors or warnings.'
      : [
          ...failures.map(([key, x]) => {
            const [endpoint, target] = key.split('/') as [EndpointId, TargetId];
            const codes = [...x.codes.entries()].filter(([code]) => code < 200 || code >= 300).map(([code, n]) => `${n} x ${code}`).join(', ');
            return `- ${ENDPOINTS[endpoint].label}, ${TARGETS[target]}: ${codes || 'no non-2xx'}; ${x.errors} connection errors, ${x.timeouts} timeouts${x.sampleError ? `; first: \`${x.sampleError.replaceAll('`', "'").replaceAll('\n', ' ').slice(0, 400)}\`` : ''}`;
          }),
          ...errorLines,
        ].join('\n');

  const leadInRows = [...rows.entries()];
  const leadInText = `\nThe lead-in of every run (its first ${LEAD_IN_S} s, on the run's own ${CONNECTIONS} connections, not in the table above), answers over 1 s
and the longest: ${leadInRows
    .map(([key, x]) => {
      const [endpoint, target] = key.split('/') as [EndpointId, TargetId];
      return `${ENDPOINTS[endpoint].label} on ${TARGETS[target].slice(0, 3)} ${x.leadIn.over1s} of ${x.leadIn.requests}, ${ms(x.leadIn.max)} ms`;
    })
    .join('; ')}. autocannon opens all its connections at once; in some runs the server saw them arrive one per
event-loop iteration, half a second for 50 when each iteration is one 12 ms answer. mia's own log, which times a request from
when Express sees it, shows no GET /v1/scan/results over ${r.longestGet.sqlite} ms on SQLite (${r.longestGet.hub} ms on the hub nodes, where that
includes waiting for PostgreSQL), lead-in included.\n`;
  const s = r.cluster.settings;
  return `## Hub: SQLite vs PostgreSQL, 1 and 3 nodes

${cpuModel()}, ${availableParallelism()} cores, ${Math.round(totalmem() / 2 ** 30)} GiB, Node ${process.version}, PostgreSQL ${r.cluster.version}
(throwaway cluster on the same ext4 disk, fsync=${s['fsync']}, synchronous_commit=${s['synchronous_commit']}, full_page_writes=${s['full_page_writes']},
shared_buffers=${s['shared_buffers']}), haproxy ${r.haproxyVersion}, ${new Date().toISOString().slice(0, 10)}. Load: autocannon 9 in the bench process,
${CONNECTIONS} connections on loopback, ${DURATION_S} s a run, ${ROUNDS} rounds; within a round the configurations alternate (round 2 in
reverse order), all GET rounds before the POST rounds, each phase after a ${WARMUP_S} s warm-up of each configuration and endpoint, each run measured after a ${LEAD_IN_S} s lead-in on its own connections. Every server runs in its
own process, all of them up for the whole run (what the idle ones cost is in the CPU table below).

- (a) one mia process on SQLite (WAL; instances are committed with synchronous=FULL, other writes NORMAL), workstation mode.
- (b) one \`serve --hub\` node (bench/hub/node.ts: createServer with hubMode and databaseUrl, rate limit out of reach) on
  PostgreSQL, requests sent to it directly; the other two nodes of (c) are up and idle.
- (c) three such nodes, one database and one data folder (the archive), behind haproxy (\`mode http\`, \`balance ${BALANCE}\`,
  keep-alive); it spread the measured requests ${r.spread.join(', ')}.
- (d) bare Express: GET answers a stored body of mia's size (${r.sizes.get50} B for limit 50, ${r.sizes.get500} B for 500;
  PostgreSQL's answers: ${r.sizes.pg50} B, ${r.sizes.pg500} B), POST reads the body and answers 201.

The same ${SCANS.toLocaleString('en')} analysed scans (0-2 findings each, bench/serve-fixture.ts's set) are stored in SQLite and in PostgreSQL
(seeding took ${r.seeds.sqlite.toFixed(1)} s and ${r.seeds.pg.toFixed(1)} s including start-up). Each POST is a distinct CT instance built in
memory from ${r.template.source} (${r.template.bytes.length} B): new SOP Instance UID, series one of ${SERIES}, study one of ${STUDIES},
one patient per study, same lengths; "imported" counts answers whose outcome was imported (not duplicate). Every mia
request is authenticated, rate-limit checked, audited (one insert) and logged.

req/s counts 2xx answers over the runs' time; latencies are over all answers of all rounds; "errors" are connection
errors and requests autocannon gave up on after 10 s.

| endpoint | configuration | req/s | rounds | vs bare | p50 ms | p99 ms | max ms | over 1 s | non-2xx | errors | imported |
|---|---|---|---|---|---|---|---|---|---|---|---|
${results}
${leadInText}
Per-node efficiency of 3 nodes = (3-node req/s) / (3 x 1-node req/s):

| endpoint | SQLite req/s | 1 node req/s | 3 nodes req/s | 3 vs 1 | per-node efficiency |
|---|---|---|---|---|---|
${efficiency}

Where the CPU went, in cores (CPU seconds per second of run, from /proc/<pid>/stat before and after each run; this machine
has ${availableParallelism()}). "serving" is the configuration's own server processes; "idle bench processes" the other servers of this bench
while they wait; "interrupts" the kernel's interrupt and softirq time, loopback networking among it, which no process is
charged with; "other processes" the rest of the machine's busy time (processes that are not this bench's); "CPU ms/req" is
serving + PostgreSQL + haproxy per answered request.

| endpoint | configuration | autocannon | serving | PostgreSQL | haproxy | idle bench processes | interrupts | other processes | idle | CPU ms/req |
|---|---|---|---|---|---|---|---|---|---|---|
${cpuRows}

Why 3 nodes cannot scale on this machine: a request needs more than its node's JavaScript thread. Its queries run in
PostgreSQL backend processes (and every commit waits for a WAL flush: an upload's, and a batch of audit events every few ms), autocannon
and, for 3 nodes, haproxy need CPU too, and all of them share the same ${availableParallelism()} cores with the rest of the host.
${idleOnOneNode < 0.25 ? `With one node the cores were already all but spent (at most ${idleOnOneNode.toFixed(2)} idle)` : `With one node up to ${idleOnOneNode.toFixed(2)} cores were still idle: the node and its PostgreSQL backends take turns, a request waiting for its queries and the backends for the next query`} (GET limit 50: ${breakdown('get50', 'pg1')};
GET limit 500: ${breakdown('get500', 'pg1')}; POST: ${breakdown('post', 'pg1')}).
Three nodes ${idleOnOneNode < 0.25 ? 'find no core the one node left idle: they split the same CPU three ways' : 'can use only what the one node left idle'} and add haproxy's
parsing and forwarding of every request and answer over a second loopback hop (GET limit 50: ${breakdown('get50', 'pg3')};
GET limit 500: ${breakdown('get500', 'pg3')}; POST: ${breakdown('post', 'pg3')}).
CPU per answered request (mia + PostgreSQL + haproxy) went from ${perReq('get50', 'pg1')} to ${perReq('get50', 'pg3')} ms for GET limit 50, ${perReq('get500', 'pg1')} to
${perReq('get500', 'pg3')} ms for limit 500 and ${perReq('post', 'pg1')} to ${perReq('post', 'pg3')} ms for POST. An efficiency below 1 here measures ${availableParallelism()} cores
shared by more processes, not the hub's design: measuring scaling needs the nodes, PostgreSQL and the load generator
on separate machines, or at least more cores than one node and its backends can keep busy.

Other processes on the host used ${otherMean.toFixed(2)} cores on average over the runs (at most ${otherMax.toFixed(2)})${otherMean > 0.1 ? ': the figures were taken under that load' : ''}; the hypervisor took ${stolen.toFixed(2)} cores (steal).
Before each run the bench waited until its servers were quiet (they finish the requests the previous run abandoned):
${r.settled.reduce((a, b) => a + b, 0).toFixed(0)} s in all, at most ${Math.max(...r.settled).toFixed(1)} s${Math.max(...r.settled) >= SETTLE_MAX_S ? ` (the ${SETTLE_MAX_S} s cap: a run began before the servers were quiet)` : ''}.

${failureText}

The whole bench took ${Math.round(r.benchSeconds)} s. Reproduce: \`npm run bench -- hub\`.
`;
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.stdout.write(await run());
