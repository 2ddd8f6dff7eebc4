/**
 * DICOM networking (issue 14), measured on what users run, in one run:
 *
 * 1. C-STORE: the same 2,000 phantom CT/MR slices sent by dcmtk's `storescu` (one association,
 *    and four at once on disjoint quarters) into (a) mia's SCP (`mia serve --dicom-port`, a fresh
 *    SQLite data folder each round), (b) Orthanc's SCP (fresh storage each round) and (c) the
 *    floor, dcmtk's `storescp` writing what it receives to a folder. Receivers take turns, three
 *    rounds; wall time from storescu's start to its exit; every instance counted as stored after
 *    each run.
 * 2. QIDO-RS study search on 10,000 single-instance studies (bench/dicom/qido-studies.py) loaded
 *    into mia (`mia import`) and Orthanc (REST, 8 concurrent): a fixed mix of searches against
 *    both /dicom-web/studies, interleaved, sequential and 8 concurrent, p50/p99 per kind, next to
 *    the floor: the same searches as bare SQL on mia's SQLite file in this process. Every search
 *    is also checked against the generator's manifest, so answers that differ are named.
 *
 * Runnable alone: `node --import tsx bench/dicom.bench.ts`. Shorter tries:
 * MIA_DICOM_BENCH_ROUNDS=1 MIA_DICOM_BENCH_QIDO_N=20 MIA_DICOM_BENCH_STUDIES=2000.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { connect } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import Database from 'better-sqlite3';
import { DATABASE_FILE } from '#server/store/sqlite.ts';
import { startOrthanc, type Orthanc } from '../test/helpers/orthanc.ts';
import { freePort } from './free-port.ts';
import { probeFsyncChain } from './fsync-chain.ts';
import { cpuSeconds, machineSeconds, orthancPid } from './hub/cpu.ts';
import { setAside } from './set-aside.ts';

const BIN = join(import.meta.dirname, '../bin/mia.js');
const PHANTOMS = join(import.meta.dirname, '../models/mia-phantom-detector/phantoms.py');
const STUDIES_PY = join(import.meta.dirname, 'dicom/qido-studies.py');
const ROUNDS = Number(process.env['MIA_DICOM_BENCH_ROUNDS'] ?? 3);
/** Requests per search kind and server, in each of the sequential and the concurrent run. */
const QIDO_N = Number(process.env['MIA_DICOM_BENCH_QIDO_N'] ?? 200);
/**
 * Seconds at most per search kind and server, sequential and again concurrent: a slow server
 * answers fewer requests (its n is shown) instead of stretching the run past a quarter hour.
 */
const QIDO_BUDGET_S = Number(process.env['MIA_DICOM_BENCH_QIDO_BUDGET_S'] ?? 12);
const STUDIES = Number(process.env['MIA_DICOM_BENCH_STUDIES'] ?? 10_000);
const CONCURRENCY = 8;
const SERIES = 25;
const SLICES = 80;
const PARALLEL_SCU = 4;
const SCU_AE = 'BENCHSCU';
const MIA_AE = 'MIA';
/**
 * Debian's dcmtk leaves Nagle's algorithm on unless TCP_NODELAY=1 is in the environment; with it
 * on, each C-STORE waits out the peer's delayed ACK (measured: 160 files in 14.8 s between storescu
 * and storescp, 7.3 s with it set on the sender only, 0.16 s on both). Every dcmtk process here
 * (storescu, storescp, and Orthanc, which links Debian's dcmtk) runs with it set, each at its best;
 * mia's SCP sets TCP_NODELAY on its sockets itself.
 */
const DCMTK_ENV = { ...process.env, TCP_NODELAY: '1' };

const sleep = (millis: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, millis));

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const ms = (value: number): string => (Number.isNaN(value) ? '-' : value < 10 ? value.toFixed(2) : value.toFixed(1));
const median = (values: readonly number[]): number => percentile([...values].sort((a, b) => a - b), 50);

function listFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...listFiles(path));
    else out.push(path);
  }
  return out;
}

function runPython(script: string, args: readonly string[]): void {
  const run = spawnSync('/usr/bin/python3', [script, ...args], { encoding: 'utf8' });
  if (run.status !== 0) throw new Error(`${script}: ${run.stderr}`);
}

function mia(args: readonly string[]): string {
  const run = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', timeout: 600_000 });
  if (run.status !== 0) throw new Error(`mia ${args.join(' ')}: ${run.stderr}`);
  return run.stdout;
}

/** What this mia offers today: the DIMSE server landed with its CLI flags, or not yet. */
function miaHelp(): string {
  const help = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' });
  return help.stdout + help.stderr;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

async function waitForPort(port: number, child: ChildProcess, output: () => string): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`exited ${child.exitCode} before listening on ${port}: ${output().slice(-2000)}`);
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1');
      socket.once('connect', () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await sleep(50);
  }
  throw new Error(`nothing listening on ${port} after 30 s: ${output().slice(-2000)}`);
}

type MiaServer = { url: string; key: string; child: ChildProcess; dataDir: string; output: () => string };

/** `mia serve` on its data folder, with a reader's key made beforehand; optionally its SCP. */
async function startMia(dataDir: string, dicom: { port: number } | null): Promise<MiaServer> {
  mkdirSync(dataDir, { recursive: true });
  const key = mia(['keys', 'create', '--role', 'radiologist', '--email', 'reader@bench.example', '--data', dataDir]).trim().split('\n').at(-1) ?? '';
  const args = [BIN, 'serve', '--port', '0', '--data', dataDir, '--rate-limit', '100000000'];
  if (dicom) args.push('--dicom-port', String(dicom.port), '--ae-title', MIA_AE, '--dicom-allow', `${SCU_AE}@127.0.0.1`);
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-20_000)));
  child.stderr.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-20_000)));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`mia serve exited ${code}: ${out}`)));
  });
  const server = { url, key, child, dataDir, output: () => out };
  if (dicom) await waitForPort(dicom.port, child, server.output);
  return server;
}

/** Instances in mia's index, read from its SQLite file beside the running server (WAL readers). */
function miaInstanceCount(dataDir: string): number {
  const db = new Database(join(dataDir, DATABASE_FILE), { readonly: true, fileMustExist: true });
  try {
    return (db.prepare('SELECT count(*) AS n FROM instances').get() as { n: number }).n;
  } finally {
    db.close();
  }
}

// ---------------------------------------------------------------------------------------------
// C-STORE

type ReceiverId = 'mia' | 'orthanc' | 'floor';

/** A DICOM receiver for one run: where to send, how many instances it holds, and its CPU time. */
type Receiver = { port: number; aeTitle: string; stored(): Promise<number>; cpu(): number; stop(): Promise<void> };

const RECEIVERS: Record<ReceiverId, string> = {
  mia: '(a) mia SCP (`mia serve --dicom-port`: answered once in its O_DSYNC intake log, then archived with fsync and indexed in SQLite)',
  orthanc: '(b) Orthanc SCP (SQLite index, SyncStorageArea: fsync per file)',
  floor: '(c) floor: dcmtk storescp +B to a folder (never fsyncs)',
};

/** The harness starts Orthanc with this process's environment: DCMTK_ENV's for the call. */
async function withDcmtkEnv<T>(start: () => Promise<T>): Promise<T> {
  const before = process.env['TCP_NODELAY'];
  process.env['TCP_NODELAY'] = '1';
  try {
    return await start();
  } finally {
    if (before === undefined) delete process.env['TCP_NODELAY'];
    else process.env['TCP_NODELAY'] = before;
  }
}

async function startReceiver(id: ReceiverId, work: string): Promise<Receiver> {
  const port = await freePort();
  if (id === 'mia') {
    const server = await startMia(join(work, 'mia-data'), { port });
    const pid = server.child.pid ?? 0;
    return {
      port,
      aeTitle: MIA_AE,
      stored: () => Promise.resolve(miaInstanceCount(server.dataDir)),
      cpu: () => cpuSeconds(pid),
      stop: () => stopChild(server.child),
    };
  }
  if (id === 'orthanc') {
    const dir = join(work, 'orthanc');
    mkdirSync(dir);
    const orthanc = await withDcmtkEnv(() => startOrthanc({ dir, modalities: { bench: { aeTitle: SCU_AE, host: '127.0.0.1', port: 1 } } }));
    const pid = orthancPid(orthanc.storageDir);
    return {
      port: orthanc.dicomPort,
      aeTitle: orthanc.aeTitle,
      stored: async () => (await orthanc.restJson<{ CountInstances: number }>('/statistics')).CountInstances,
      cpu: () => cpuSeconds(pid),
      stop: () => orthanc.stop(),
    };
  }
  const dir = join(work, 'storescp');
  mkdirSync(dir, { recursive: true });
  // +B: the data set is written exactly as received, the least a receiver that keeps files does.
  const child = spawn('storescp', ['--aetitle', 'FLOOR', '+B', '-od', dir, String(port)], { stdio: ['ignore', 'pipe', 'pipe'], env: DCMTK_ENV });
  let out = '';
  child.stderr.on('data', (c: Buffer) => (out = (out + c.toString()).slice(-8000)));
  await waitForPort(port, child, () => out);
  const pid = child.pid ?? 0;
  return {
    port,
    aeTitle: 'FLOOR',
    stored: () => Promise.resolve(readdirSync(dir).length),
    cpu: () => cpuSeconds(pid),
    stop: () => stopChild(child),
  };
}

/** storescu processes, each one association sending its share of the files; wall time to the last exit. */
async function storescu(files: readonly string[], target: Receiver, processes: number): Promise<{ seconds: number; problems: string[] }> {
  const share = Math.ceil(files.length / processes);
  const problems: string[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: processes }, async (_, i) => {
      const part = files.slice(i * share, (i + 1) * share);
      const child = spawn('storescu', ['-aet', SCU_AE, '-aec', target.aeTitle, '127.0.0.1', String(target.port), ...part], { stdio: ['ignore', 'ignore', 'pipe'], env: DCMTK_ENV });
      let err = '';
      child.stderr.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
      const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
      if (code !== 0 || err.trim()) problems.push(`storescu ${i + 1}/${processes} exit ${code}: ${err.trim().split('\n').slice(0, 3).join(' | ')}`);
    }),
  );
  return { seconds: (performance.now() - started) / 1000, problems };
}

type StoreRun = { receiver: ReceiverId; processes: number; round: number; seconds: number; stored: number; cpu: number; problems: string[] };

async function storeRun(id: ReceiverId, processes: number, round: number, files: readonly string[], work: string): Promise<StoreRun> {
  const dir = mkdtempSync(join(work, `${id}-${processes}-`));
  const receiver = await startReceiver(id, dir);
  try {
    const cpuBefore = receiver.cpu();
    const sent = await storescu(files, receiver, processes);
    const cpu = receiver.cpu() - cpuBefore;
    // Counted at once: storescu has its last answer, so every instance acknowledged must be there.
    const stored = await receiver.stored();
    const problems = [...sent.problems];
    if (stored !== files.length) problems.push(`${stored} of ${files.length} instances stored after storescu exited`);
    return { receiver: id, processes, round, seconds: sent.seconds, stored, cpu, problems };
  } finally {
    await receiver.stop();
  }
}

async function cstore(work: string, miaHasScp: boolean): Promise<string[]> {
  const corpus = join(work, 'cstore-corpus');
  runPython(PHANTOMS, ['--out', corpus, '--series', String(SERIES), '--seed', '1', '--size', '128', '--slices', String(SLICES), '--modality', 'both']);
  const files = listFiles(corpus);
  let bytes = 0;
  for (const file of files) bytes += readFileSync(file).length; // and the page cache is warm
  const receivers: ReceiverId[] = miaHasScp ? ['mia', 'orthanc', 'floor'] : ['orthanc', 'floor'];
  const runs: StoreRun[] = [];
  // Each round's storage stays until the run ends (bench/set-aside.ts: on this machine's file
  // system, removing one receiver's files made the next receiver pay for it: mia's thread pool
  // spent 1.92 s of system CPU receiving the same 2,000 files right after a removal against 0.61 s
  // a minute later, 3.13 s against 2.54 s of wall time).
  const stores = join(work, 'stores');
  mkdirSync(stores);
  for (let round = 0; round < ROUNDS; round++) {
    // Odd rounds go the other way round, so no receiver always follows the same one.
    const order = round % 2 === 0 ? receivers : [...receivers].reverse();
    for (const processes of [1, PARALLEL_SCU]) {
      for (const id of order) {
        const run = await storeRun(id, processes, round, files, stores);
        process.stderr.write(`bench dicom: C-STORE ${id} x${processes} round ${round + 1}: ${run.seconds.toFixed(2)} s, ${run.stored} stored${run.problems.length ? `, ${run.problems.join('; ')}` : ''}\n`);
        runs.push(run);
      }
    }
  }
  const pick = (id: ReceiverId, processes: number): StoreRun[] => runs.filter((r) => r.receiver === id && r.processes === processes);
  const rate = (seconds: number): number => files.length / seconds;
  const lines = [
    `### C-STORE: ${files.length} instances from storescu`,
    '',
    `${files.length} phantom CT/MR slices (models/mia-phantom-detector/phantoms.py, ${SERIES} series x ${SLICES}, 128x128 16-bit, explicit VR little endian, ` +
      `${(bytes / files.length / 1024).toFixed(1)} KiB each, ${(bytes / 1e6).toFixed(1)} MB), page cache warm. dcmtk ${dcmtkVersion()} storescu with its default ` +
      `presentation contexts (uncompressed syntaxes), one association per process; ${PARALLEL_SCU} processes send disjoint quarters at once. ` +
      `Receivers take turns (order reversed every other round), ${ROUNDS} rounds, each on fresh storage, all of it set aside until the run ends (on ext4 without a journal, as here, files created just after thousands were removed cost the kernel a scan past each freed inode, which charged each receiver for the one before it: bench/set-aside.ts); the median round is shown, all rounds in brackets. ` +
      `Wall time is storescu's start to its (last) exit; receiver CPU is the receiving process's user+system time over the run.`,
    '',
    '| receiver | associations | s (median) | instances/s | MB/s | receiver CPU s | rounds, s | stored | vs Orthanc | vs floor |',
    '|---|---|---|---|---|---|---|---|---|---|',
  ];
  const medianOf = (id: ReceiverId, processes: number): number => median(pick(id, processes).map((r) => r.seconds));
  for (const processes of [1, PARALLEL_SCU]) {
    for (const id of ['mia', 'orthanc', 'floor'] as const) {
      const list = pick(id, processes);
      if (list.length === 0) {
        lines.push(`| ${RECEIVERS[id]} | ${processes} | not available: mia serve has no --dicom-port yet | | | | | | | |`);
        continue;
      }
      const seconds = medianOf(id, processes);
      const allStored = list.every((r) => r.stored === files.length);
      const vsOrthanc = pick('orthanc', processes).length ? medianOf('orthanc', processes) / seconds : Number.NaN;
      const vsFloor = pick('floor', processes).length ? medianOf('floor', processes) / seconds : Number.NaN;
      lines.push(
        `| ${RECEIVERS[id]} | ${processes} | ${seconds.toFixed(2)} | ${rate(seconds).toFixed(0)} | ${(bytes / seconds / 1e6).toFixed(1)} | ` +
          `${median(list.map((r) => r.cpu)).toFixed(2)} | ${list.map((r) => r.seconds.toFixed(2)).join(', ')} | ` +
          `${allStored ? `all ${files.length}, every round` : list.map((r) => r.stored).join(', ')} | ${vsOrthanc.toFixed(2)}x | ${vsFloor.toFixed(2)}x |`,
      );
    }
  }
  const problems = runs.flatMap((r) => r.problems.map((p) => `${r.receiver} x${r.processes} round ${r.round + 1}: ${p}`));
  lines.push('');
  if (miaHasScp) {
    const ratio = medianOf('orthanc', 1) / medianOf('mia', 1);
    lines.push(`Goal mia >= 2x Orthanc (one association): ${ratio.toFixed(2)}x, ${ratio >= 2 ? 'met' : 'not met'}.`);
    // Right after the runs, in the same minutes: what the disk allows one association.
    const probe = probeFsyncChain(join(work, 'fsync-chain'), Math.round(bytes / files.length));
    const goal = 2 * rate(medianOf('orthanc', 1));
    const ceiling = 1000 / probe.logMs;
    lines.push(
      '',
      `What the disk allows one association (bench/fsync-chain.ts, ${probe.instances} instances of this size one after another, as storescu sends them, ` +
        `right after the runs): mia waits before each answer for one append to its intake log made durable, ${probe.logMs.toFixed(2)} ms median ` +
        `(p90 ${probe.logP90Ms.toFixed(2)} ms), a ceiling of ${ceiling.toFixed(0)} instances/s with no CPU, network or sender time at all, against the goal's ` +
        `${goal.toFixed(0)}/s (2x Orthanc). Before the intake log mia waited for three in turn: the file written and fsynced ${probe.fileMs.toFixed(2)} ms, ` +
        `renamed and its folder fsynced ${probe.dirMs.toFixed(2)} ms, a 12 KiB WAL append fdatasynced ${probe.walMs.toFixed(2)} ms: ` +
        `${probe.chainMs.toFixed(2)} ms (p90 ${probe.chainP90Ms.toFixed(2)} ms), a ceiling of ${(1000 / probe.chainMs).toFixed(0)}/s.`,
    );
    if (pick('floor', 1).length) {
      // storescu waits for each answer: the floor's time is what the sender and the socket cost;
      // what a receiver adds per instance on top of it is its own work.
      const floorRatio = medianOf('orthanc', 1) / medianOf('floor', 1);
      const added = (id: ReceiverId): string => (((medianOf(id, 1) - medianOf('floor', 1)) / files.length) * 1000).toFixed(2);
      lines.push(
        '',
        `The floor itself is ${floorRatio.toFixed(2)}x Orthanc on one association: a receiver that only writes what it gets ` +
          `(no fsync, no index) ${floorRatio >= 2 ? 'reaches 2x, so the goal is reachable' : 'stays under 2x, so no receiver fed by this storescu can reach the goal'}. ` +
          `On top of the floor's time, per instance, mia adds ${added('mia')} ms and Orthanc ${added('orthanc')} ms ` +
          `(mia makes the instance durable in its intake log before answering and archives and indexes it just after, on the same disk and event loop; Orthanc fsyncs its file and then answers).`,
      );
      // The goal as a budget: what 2x Orthanc leaves a receiver per instance beyond the sender's
      // and the socket's own time, and how much of it the durable append alone takes.
      const budget = ((medianOf('orthanc', 1) / 2 - medianOf('floor', 1)) / files.length) * 1000;
      const miaOwn = ((medianOf('mia', 1) - medianOf('floor', 1)) / files.length) * 1000;
      lines.push(
        '',
        `As a budget: 2x Orthanc leaves a receiver ${budget.toFixed(2)} ms per instance on top of the floor's time. mia's durable append alone ` +
          `waits ${probe.logMs.toFixed(2)} ms of it (the median above), leaving ${(budget - probe.logMs).toFixed(2)} ms to receive, check, answer and ` +
          `index an instance, for which mia took ${(miaOwn - probe.logMs).toFixed(2)} ms in this run.`,
      );
    }
  } else {
    lines.push('mia\'s SCP had not landed when this ran (`mia serve` has no --dicom-port): its rows are not available, the goal (mia >= 2x Orthanc) is unmeasured.');
  }
  lines.push(
    '',
    'Where the time goes, measured apart from this bench on 2026-11-26 (2,000 of these instances, one association, timestamps in the SCP, ' +
      'docs/dicom-network.md "Written in place"): the intake append was 0.37 ms median but 1.43 ms mean, its tail set by two things: an O_DSYNC ' +
      'write that grows a file commits the ext4 journal with the archive\'s creates and fsyncs in it, and its write waited on libuv\'s thread pool ' +
      'behind the archive\'s file work. Segments are now zero-filled once and written in place (recycled when indexed), and small appends are ' +
      'written in the event loop: append 0.22-0.25 ms median, 0.32-0.47 ms mean; 668-688/s against 387-542/s before in the same minutes. What is ' +
      'left is the event loop itself, per instance: ~0.25 ms in the append, ~0.2 ms checking the instance, ~0.1 ms writing the answer, ~0.13 ms of ' +
      'garbage collection, and the indexer between them; storescu alone needs the floor\'s time. Four associations stay slower than Orthanc ' +
      '(0.73x in the previous run of this bench as well): one event loop serves all of mia\'s associations. Before the intake log, mia answered ' +
      'after the archive\'s fsyncs and the index commit of each instance: 262/s in the 09:34 run of this bench.',
    '',
    'A CPU profile of `mia serve` under this storescu on 2026-11-27 (2,000 instances, 2.6 s): the append 563 ms (the disk\'s wait, in the ' +
      'event loop on purpose), the checks 256 ms (the parse 169), answering 191 ms (the socket write 154), garbage collection 180 ms, PDU ' +
      'receipt 150 ms, the indexer about 200 ms, idle 811 ms (storescu\'s own time). Each instance was hashed twice and each fragment copied ' +
      'before the concatenation; now once and not at all (hashing 88 -> 40 ms, Buffer allocations 39 -> 9 ms). Tried and not kept: the append on ' +
      'the thread pool so the checks overlap the disk\'s wait, 2.90-3.32 s against 2.39-2.92 s (two thread hand-offs an instance on two cores ' +
      'cost more than the overlap); with the archive\'s pool work capped at 4 or 16 files in flight, 3.29-3.43 s. The goal moves with Orthanc\'s ' +
      'own speed. Measured apart on 2026-11-27, storage kept as here: with the indexer held back until the association\'s release (an ' +
      'experiment), mia\'s receive path alone (receive, check, append durably, answer) took 1.73-1.97 s for these 2,000 instances and indexing ' +
      'all of them at the release 0.45-0.57 s more, against 2.33-2.37 s with the indexer interleaved as shipped. With Orthanc at 3.28 s (the ' +
      'median of that day\'s run), 2x asks for 1.64 s: less than the receive path alone takes, so even an indexer on another core (its own ' +
      'connection, the archive\'s pool work handed from there) could not reach it on this machine. Before storage was kept between rounds ' +
      '(see above), every receiver here paid for the previous one\'s removed files: floor 1.54-1.72 s, Orthanc 3.87-4.28 s, mia 2.51-2.73 s.',
  );
  if (problems.length) lines.push('', 'Problems seen (storescu messages, missing instances):', '', ...problems.slice(0, 20).map((p) => `- ${p}`));
  lines.push('');
  return lines;
}

function dcmtkVersion(): string {
  const out = spawnSync('storescu', ['--version'], { encoding: 'utf8' }).stdout;
  return /v(\d+\.\d+\.\d+)/.exec(out)?.[1] ?? '?';
}

// ---------------------------------------------------------------------------------------------
// QIDO-RS

type StudyRow = { study_uid: string; patient_name: string; patient_id: string; study_date: string; modality: string; accession: string };
type Manifest = { patients: number; studies: StudyRow[] };

/** One search a user makes: its query string, the SQL floor, and which studies answer it. */
type Search = {
  query: string;
  sql: string;
  params: unknown[];
  /** The studies that match; null when the answer is a page of an order QIDO leaves open. */
  expected: Set<string> | null;
  /** For a page: how many results, each matching this. */
  page?: { size: number; matches: (s: StudyRow) => boolean };
};

type KindId = 'name' | 'fuzzy' | 'pid' | 'month' | 'modality' | 'accession' | 'page';
type Kind = { id: KindId; label: string; searches: Search[] };

/** The columns a study result carries (PS3.18 Table 10.6.3-3), as the floor must read them. */
const FLOOR_SELECT = `
  SELECT st.study_uid, st.study_date, st.study_time, st.accession_number, st.description,
         p.name, p.patient_id, p.birth_date, p.sex,
         (SELECT count(*) FROM scans s WHERE s.study_ref = st.id) AS series,
         (SELECT count(*) FROM scans s JOIN instances i ON i.scan_ref = s.id WHERE s.study_ref = st.id) AS instances,
         (SELECT group_concat(DISTINCT s.modality) FROM scans s WHERE s.study_ref = st.id) AS modalities
    FROM studies st JOIN patients p ON p.id = st.patient_ref`;

function nameWords(name: string): string[] {
  return name.toUpperCase().split(/[\^ ]+/).filter(Boolean);
}

function kinds(manifest: Manifest): Kind[] {
  const studies = manifest.studies;
  const uids = (match: (s: StudyRow) => boolean): Set<string> => new Set(studies.filter(match).map((s) => s.study_uid));
  // Values spread over the data, the same every run: every 97th study's patient and accession.
  const sample = Array.from({ length: 20 }, (_, i) => studies[(i * 97 * 7) % studies.length]!);
  const months = Array.from({ length: 20 }, (_, i) => {
    const year = 2016 + (i % 10);
    const month = String(1 + ((i * 5) % 12)).padStart(2, '0');
    return [`${year}${month}01`, `${year}${month}31`] as const;
  });
  return [
    {
      id: 'name',
      label: 'PatientName=SMI*',
      searches: [{ query: 'PatientName=SMI*', sql: `${FLOOR_SELECT} WHERE p.name LIKE ? ORDER BY st.id`, params: ['SMI%'], expected: uids((s) => s.patient_name.toUpperCase().startsWith('SMI')) }],
    },
    {
      id: 'fuzzy',
      label: 'PatientName=mari&fuzzymatching=true',
      searches: [
        {
          query: 'PatientName=mari&fuzzymatching=true',
          sql: `${FLOOR_SELECT} WHERE ' ' || replace(p.name, '^', ' ') LIKE ? ORDER BY st.id`,
          params: ['% mari%'],
          // PS3.4 C.2.2.2.1.7 leaves fuzzy matching to the implementation; this is "a name part starts with it".
          expected: uids((s) => nameWords(s.patient_name).some((w) => w.startsWith('MARI'))),
        },
      ],
    },
    {
      id: 'pid',
      label: 'PatientID=<id> (20 patients)',
      searches: sample.map((s) => ({ query: `PatientID=${s.patient_id}`, sql: `${FLOOR_SELECT} WHERE p.patient_id = ? ORDER BY st.id`, params: [s.patient_id], expected: uids((t) => t.patient_id === s.patient_id) })),
    },
    {
      id: 'month',
      label: 'StudyDate=<a month> (20 months)',
      searches: months.map(([from, to]) => ({
        query: `StudyDate=${from}-${to}`,
        sql: `${FLOOR_SELECT} WHERE st.study_date BETWEEN ? AND ? ORDER BY st.id`,
        params: [from, to],
        expected: uids((t) => t.study_date >= from && t.study_date <= to),
      })),
    },
    {
      id: 'modality',
      label: 'ModalitiesInStudy=CT&limit=25',
      searches: [
        {
          query: 'ModalitiesInStudy=CT&limit=25',
          sql: `${FLOOR_SELECT} WHERE EXISTS (SELECT 1 FROM scans m WHERE m.study_ref = st.id AND m.modality = ?) ORDER BY st.id LIMIT 25`,
          params: ['CT'],
          expected: null,
          page: { size: 25, matches: (s) => s.modality === 'CT' },
        },
      ],
    },
    {
      id: 'accession',
      label: 'AccessionNumber=<number> (20 studies)',
      searches: sample.map((s) => ({ query: `AccessionNumber=${s.accession}`, sql: `${FLOOR_SELECT} WHERE st.accession_number = ? ORDER BY st.id`, params: [s.accession], expected: uids((t) => t.accession === s.accession) })),
    },
    {
      id: 'page',
      label: 'no filter, limit=100&offset=5000',
      searches: [{ query: 'limit=100&offset=5000', sql: `${FLOOR_SELECT} ORDER BY st.id LIMIT 100 OFFSET 5000`, params: [], expected: null, page: { size: 100, matches: () => true } }],
    },
  ];
}

type QidoTarget = { id: 'mia' | 'orthanc'; label: string; base: string; headers: Record<string, string> };

/** One search over HTTP: the study UIDs answered, and the time to the last byte of the body. */
async function search(target: QidoTarget, query: string): Promise<{ millis: number; uids: string[]; status: number }> {
  const started = performance.now();
  const response = await fetch(`${target.base}/studies?${query}`, { headers: { Accept: 'application/dicom+json', ...target.headers } });
  const body = await response.text();
  const millis = performance.now() - started;
  if (!response.ok) return { millis, uids: [], status: response.status };
  const items = body.trim() ? (JSON.parse(body) as Array<Record<string, { Value?: unknown[] }>>) : [];
  return { millis, uids: items.map((item) => String(item['0020000D']?.Value?.[0] ?? '')), status: response.status };
}

type Check = { kind: KindId; target: string; query: string; problem: string };

function checkAnswer(kind: KindId, target: string, s: Search, uids: readonly string[], byUid: Map<string, StudyRow>): Check | null {
  const problem = (text: string): Check => ({ kind, target, query: s.query, problem: text });
  if (s.expected) {
    const got = new Set(uids);
    const missing = [...s.expected].filter((u) => !got.has(u)).length;
    const extra = [...got].filter((u) => !s.expected!.has(u)).length;
    if (missing || extra || got.size !== uids.length) return problem(`${uids.length} answered, ${s.expected.size} expected: ${missing} missing, ${extra} not matching`);
    return null;
  }
  const page = s.page!;
  const wrong = uids.filter((u) => !byUid.has(u) || !page.matches(byUid.get(u)!)).length;
  if (uids.length !== page.size || wrong) return problem(`${uids.length} answered (page of ${page.size} expected), ${wrong} not matching`);
  return null;
}

type Sample = { kind: KindId; target: string; millis: number };

async function loadOrthanc(orthanc: Orthanc, files: readonly string[]): Promise<number> {
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < files.length) {
        const file = files[next++]!;
        await (await orthanc.rest('/instances', { method: 'POST', body: await readFile(file), headers: { 'Content-Type': 'application/dicom' } })).arrayBuffer();
      }
    }),
  );
  return (performance.now() - started) / 1000;
}

async function qido(work: string): Promise<string[]> {
  const corpus = join(work, 'qido-corpus');
  const manifestFile = join(work, 'studies.json');
  runPython(STUDIES_PY, ['--out', corpus, '--studies', String(STUDIES), '--seed', '1', '--manifest', manifestFile]);
  const manifest = JSON.parse(readFileSync(manifestFile, 'utf8')) as Manifest;
  const byUid = new Map(manifest.studies.map((s) => [s.study_uid, s]));
  const files = listFiles(corpus);
  const dataDir = join(work, 'qido-mia');
  mkdirSync(dataDir, { recursive: true });
  const started = performance.now();
  mia(['import', corpus, '--data', dataDir]);
  const miaImportS = (performance.now() - started) / 1000;
  const server = await startMia(dataDir, null);
  // In the work folder, set aside with it at the end (bench/set-aside.ts), not removed when it stops.
  const orthancDir = join(work, 'qido-orthanc');
  mkdirSync(orthancDir);
  const orthanc = await startOrthanc({ dir: orthancDir });
  const db = new Database(join(dataDir, DATABASE_FILE), { readonly: true, fileMustExist: true });
  try {
    const orthancLoadS = await loadOrthanc(orthanc, files);
    const orthancCount = (await orthanc.restJson<{ CountStudies: number }>('/statistics')).CountStudies;
    const miaStudies = (db.prepare('SELECT count(*) AS n FROM studies').get() as { n: number }).n;
    const all: QidoTarget[] = [
      { id: 'mia', label: 'mia GET /dicom-web/studies', base: `${server.url}/dicom-web`, headers: { Authorization: `Bearer ${server.key}` } },
      { id: 'orthanc', label: 'Orthanc DICOMweb plugin', base: orthanc.dicomWebUrl, headers: {} },
    ];
    const probe = await search(all[0]!, 'limit=1');
    const miaQido = probe.status === 200 && probe.uids.length === 1;
    const targets = miaQido ? all : all.slice(1);
    const kindList = kinds(manifest);
    const statements = new Map(kindList.flatMap((k) => k.searches.map((s) => [s.query, db.prepare(s.sql)] as const)));
    const floor = (s: Search): { millis: number; uids: string[] } => {
      const t0 = performance.now();
      const rows = statements.get(s.query)!.all(...s.params) as Array<{ study_uid: string }>;
      return { millis: performance.now() - t0, uids: rows.map((r) => r.study_uid) };
    };

    // Answers first: every distinct search once against each, checked against the manifest.
    const checks: Check[] = [];
    const disagreements: string[] = [];
    for (const kind of kindList) {
      for (const s of kind.searches) {
        const answers = new Map<string, string[]>();
        for (const target of targets) {
          const answer = await search(target, s.query);
          answers.set(target.id, answer.uids);
          const problem = answer.status === 200 ? checkAnswer(kind.id, target.id, s, answer.uids, byUid) : { kind: kind.id, target: target.id, query: s.query, problem: `HTTP ${answer.status}` };
          if (problem) checks.push(problem);
        }
        const floorProblem = checkAnswer(kind.id, 'floor', s, floor(s).uids, byUid);
        if (floorProblem) checks.push(floorProblem);
        const [a, b] = [answers.get('mia'), answers.get('orthanc')];
        if (a && b && s.expected && (a.length !== b.length || a.some((u) => !b.includes(u)))) disagreements.push(s.query);
      }
    }

    // Timed: per kind, the servers and the floor take turns in blocks, the order reversed every
    // other block; values rotate through the kind's searches.
    const blocks = 4;
    const perBlock = Math.max(1, Math.round(QIDO_N / blocks));
    const sequential: Sample[] = [];
    const concurrent: Sample[] = [];
    const concurrentWall = new Map<string, number>();
    const machineBefore = machineSeconds();
    const wallStarted = performance.now();
    for (const kind of kindList) {
      for (let block = 0; block < blocks; block++) {
        const order = block % 2 === 0 ? [...targets] : [...targets].reverse();
        for (const target of order) {
          const blockStarted = performance.now();
          for (let i = 0; i < perBlock && performance.now() - blockStarted < (QIDO_BUDGET_S * 1000) / blocks; i++) {
            const s = kind.searches[(block * perBlock + i) % kind.searches.length]!;
            sequential.push({ kind: kind.id, target: target.id, millis: (await search(target, s.query)).millis });
          }
        }
        for (let i = 0; i < perBlock; i++) {
          const s = kind.searches[(block * perBlock + i) % kind.searches.length]!;
          sequential.push({ kind: kind.id, target: 'floor', millis: floor(s).millis });
        }
      }
      for (const target of targets) {
        let next = 0;
        const total = perBlock * blocks;
        const t0 = performance.now();
        await Promise.all(
          Array.from({ length: CONCURRENCY }, async () => {
            while (next < total && performance.now() - t0 < QIDO_BUDGET_S * 1000) {
              const s = kind.searches[next++ % kind.searches.length]!;
              concurrent.push({ kind: kind.id, target: target.id, millis: (await search(target, s.query)).millis });
            }
          }),
        );
        concurrentWall.set(`${kind.id}/${target.id}`, (concurrentWall.get(`${kind.id}/${target.id}`) ?? 0) + (performance.now() - t0) / 1000);
      }
      process.stderr.write(`bench dicom: QIDO ${kind.id} done\n`);
    }
    const wallS = (performance.now() - wallStarted) / 1000;
    const machineAfter = machineSeconds();
    const busy = (machineAfter.busy - machineBefore.busy) / wallS;

    const stats = (samples: readonly Sample[], target: string, kind?: KindId): { p50: number; p99: number; n: number } => {
      const list = samples.filter((x) => x.target === target && (!kind || x.kind === kind)).map((x) => x.millis).sort((a, b) => a - b);
      return { p50: percentile(list, 50), p99: percentile(list, 99), n: list.length };
    };
    const cell = (samples: readonly Sample[], target: string, kind?: KindId): string => {
      if (target !== 'floor' && !targets.some((t) => t.id === target)) return 'not available';
      const s = stats(samples, target, kind);
      const asked = kind ? QIDO_N : QIDO_N * kindList.length;
      return `${ms(s.p50)} / ${ms(s.p99)}${s.n < asked ? ` (n=${s.n})` : ''}`;
    };
    const rps = (kind: KindId | null, target: string): string => {
      if (!targets.some((t) => t.id === target)) return '-';
      const n = concurrent.filter((x) => x.target === target && (!kind || x.kind === kind)).length;
      const seconds = [...concurrentWall].filter(([k]) => k.endsWith(`/${target}`) && (!kind || k.startsWith(`${kind}/`))).reduce((t, [, v]) => t + v, 0);
      return (n / seconds).toFixed(0);
    };
    const lines = [
      `### QIDO-RS study search on ${manifest.studies.length.toLocaleString('en-US')} studies`,
      '',
      `${manifest.studies.length} single-instance studies of ${manifest.patients} patients (bench/dicom/qido-studies.py: 16x16 images, names from common surname and ` +
        `given-name lists, study dates over 2016-2025, CT/MR/CR/US, accession numbers, descriptions), the same files in both: ` +
        `\`mia import\` took ${miaImportS.toFixed(1)} s (${miaStudies} studies indexed), Orthanc REST POST /instances with ${CONCURRENCY} concurrent clients ` +
        `${orthancLoadS.toFixed(1)} s (${orthancCount} studies). ` +
        `${perBlock * blocks} requests per search kind and server, sequential on one keep-alive connection, the servers and the floor taking turns in ` +
        `blocks of ${perBlock}; then ${perBlock * blocks} per kind and server with ${CONCURRENCY} concurrent clients; at most ${QIDO_BUDGET_S} s per kind and server ` +
        `in each (a server that answers slower is sampled fewer times: n shown). Latency is the request's start to the ` +
        `last byte of the body (the JSON parsed afterwards); the floor is the same search as one SQL statement (prepared once, study-level ` +
        `columns, series/instance counts and modalities in study) on mia's SQLite file, with better-sqlite3 in the bench process. ` +
        `mia answers with a reader's key (every request authenticated, rate-limit checked and audited).`,
      '',
      '| search | mia p50 / p99 ms | Orthanc p50 / p99 ms | floor (SQL) p50 / p99 ms | mia, 8 concurrent p50 / p99 ms | Orthanc, 8 concurrent p50 / p99 ms | req/s at 8: mia / Orthanc |',
      '|---|---|---|---|---|---|---|',
      ...kindList.map(
        (k) =>
          `| ${k.label} | ${cell(sequential, 'mia', k.id)} | ${cell(sequential, 'orthanc', k.id)} | ${cell(sequential, 'floor', k.id)} | ` +
          `${cell(concurrent, 'mia', k.id)} | ${cell(concurrent, 'orthanc', k.id)} | ${rps(k.id, 'mia')} / ${rps(k.id, 'orthanc')} |`,
      ),
      `| all kinds | ${cell(sequential, 'mia')} | ${cell(sequential, 'orthanc')} | ${cell(sequential, 'floor')} | ${cell(concurrent, 'mia')} | ${cell(concurrent, 'orthanc')} | ${rps(null, 'mia')} / ${rps(null, 'orthanc')} |`,
      '',
    ];
    if (!miaQido) lines.push(`mia's QIDO-RS had not landed when this ran (GET /dicom-web/studies answered ${probe.status}): its columns are not available.`, '');
    const searchesChecked = kindList.reduce((n, k) => n + k.searches.length, 0);
    lines.push(
      `Answers: each of the ${searchesChecked} distinct searches was asked once of each server and the floor, and checked against the generator's manifest ` +
        '(the set of studies that match, or for a page: its size, and that every study on it matches). ' +
        (checks.length === 0 ? 'All answered as expected.' : `${checks.length} ${checks.length === 1 ? 'answer' : 'answers'} differed:`),
    );
    if (checks.length) {
      lines.push('', '| server | search | what differed |', '|---|---|---|');
      for (const c of checks.slice(0, 25)) lines.push(`| ${c.target} | ${c.query} | ${c.problem} |`);
      if (checks.length > 25) lines.push(`| ... | ${checks.length - 25} more | |`);
    }
    if (miaQido) lines.push('', `mia and Orthanc answered different study sets for ${disagreements.length} of the searches with one right answer${disagreements.length ? `: ${disagreements.slice(0, 6).join(', ')}${disagreements.length > 6 ? ', ...' : ''}` : ''}.`);
    lines.push('', `Machine while searching: ${(busy * 100).toFixed(0)}% of ${cpus().length} cores busy on average (all processes, the bench's own included).`, '');
    return lines;
  } finally {
    db.close();
    await stopChild(server.child);
    await orthanc.stop();
  }
}

export async function run(): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), 'mia-dicom-bench-'));
  const load = loadavg().map((l) => l.toFixed(2)).join(', ');
  const started = performance.now();
  try {
    const help = miaHelp();
    const miaHasScp = help.includes('--dicom-port');
    const store = await cstore(work, miaHasScp);
    const search = await qido(work);
    const minutes = (performance.now() - started) / 60_000;
    return [
      '## DICOM networking',
      '',
      `Issue 14's acceptance figures, measured on processes and sockets on loopback: Node ${process.version}, ${cpus().length} cores, ` +
        `${new Date().toISOString().slice(0, 10)}; load average at the start ${load} (other work may have been running on this shared machine: ` +
        `re-run on a quiet one before comparing with other sections). The whole run took ${minutes.toFixed(1)} minutes.`,
      '',
      ...store,
      ...search,
      'Reproduce: `npm run bench -- dicom` (needs Debian\'s orthanc, orthanc-dicomweb and dcmtk: scripts/system-deps.sh).',
      '',
    ].join('\n');
  } finally {
    setAside(work);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  process.stdout.write(await run());
}
