/**
 * Sync throughput (issue 13), measured on what users run: the hub as a `mia serve --hub` process
 * over HTTP, and `mia sync now` as a process. In one run, rounds interleaved:
 *
 * - instance files, 33 KiB and 512 KiB phantom instances: in buckets as `mia sync now` sends them
 *   (POST /v1/sync/blobs), and one by one (PUT /v1/sync/blobs/{sha256}), against the floor the
 *   issue names: a bare Node HTTP server (its own process) that writes each PUT body to a file
 *   and fsyncs it, sent the same files one by one;
 * - rows: POST /v1/sync/push of instance changes in batches of 100 and 500 (files already on the
 *   hub), and GET /v1/sync/pull of them by a second device in pages of 100 and 500;
 * - a cold initial sync of 1,000 scans by `mia sync now` into an empty hub;
 * - an idle round of `mia sync now` on a workstation holding 100,000 pulled changes that wait for
 *   files of studies not assigned to it, beside the same round with nothing waiting.
 *
 * Runnable alone: `node --import tsx bench/sync.bench.ts`.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BUCKET_TYPE, encodeBucket } from '#server/sync/blobs.ts';
import { setAside } from './set-aside.ts';

const BIN = join(import.meta.dirname, '../bin/mia.js');
const PHANTOMS = join(import.meta.dirname, '../models/mia-phantom-detector/phantoms.py');
const ROUNDS = Number(process.env['ROUNDS'] ?? '3');

type Server = { url: string; child: ChildProcess };

function mia(args: readonly string[], input = ''): string {
  const run = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8', input, timeout: 600_000 });
  if (run.status !== 0) throw new Error(`mia ${args.join(' ')}: ${run.stderr}`);
  return run.stdout;
}

/** As \`mia\`, without blocking this process: the fault proxy forwards from this event loop. */
async function miaAsync(args: readonly string[], input = ''): Promise<string> {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  child.stdin.end(input);
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`mia ${args.join(' ')}: ${err}`);
  return out;
}

async function serve(args: readonly string[]): Promise<Server> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', () => {
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m?.[1]) resolve(m[1]);
    });
    child.once('exit', (code) => reject(new Error(`mia serve exited ${code}: ${out}`)));
  });
  return { url, child };
}

async function stop(s: Server): Promise<void> {
  const exited = new Promise((resolve) => s.child.once('exit', resolve));
  s.child.kill('SIGTERM');
  await exited;
}

/** The floor: receive a body, write it to a file, fsync it, answer. Its own process, as the hub is. */
const BARE_SERVER = `
import { createServer } from 'node:http';
import { openSync, writeSync, fsyncSync, closeSync } from 'node:fs';
import { join } from 'node:path';
const dir = process.argv[2];
let n = 0;
const server = createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const fd = openSync(join(dir, String(n++)), 'w');
    writeSync(fd, body);
    fsyncSync(fd);
    closeSync(fd);
    res.writeHead(201, { 'content-type': 'application/json' });
    res.end('{}');
  });
});
server.listen(0, '127.0.0.1', () => console.log('listening on http://127.0.0.1:' + server.address().port));
`;

async function bareServer(dir: string, script: string): Promise<Server> {
  const child = spawn(process.execPath, [script, dir], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve) => child.stdout.on('data', (c: Buffer) => {
    const m = /listening on (http:\/\/\S+)/.exec(c.toString());
    if (m?.[1]) resolve(m[1]);
  }));
  return { url, child };
}

function listFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile() && e.name.endsWith('.dcm')).map((e) => join(e.parentPath, e.name)).sort();
}

type Blob = { sha: string; bytes: Buffer };

/** What `mia sync now` sends: buckets of up to 500 files and 16 MiB (server/sync/client.ts). */
async function bucketAll(url: string, key: string, blobs: readonly Blob[]): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < blobs.length; ) {
    const part: Blob[] = [];
    let bytes = 0;
    while (i < blobs.length && part.length < 500 && bytes + blobs[i]!.bytes.length <= 16 * 1024 * 1024) {
      bytes += blobs[i]!.bytes.length;
      part.push(blobs[i]!);
      i += 1;
    }
    const res = await fetch(url + '/v1/sync/blobs', {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': BUCKET_TYPE, 'mia-sync-protocol': '1' },
      body: encodeBucket(part.map((b) => ({ sha256: b.sha, bytes: b.bytes }))),
    });
    if (res.status !== 201) throw new Error(`bucket ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  }
  return (performance.now() - started) / 1000;
}

async function putAll(url: string, key: string | null, blobs: readonly Blob[], path: (b: Blob) => string): Promise<number> {
  const started = performance.now();
  for (const b of blobs) {
    const headers: Record<string, string> = { 'content-type': 'application/octet-stream', 'mia-sync-protocol': '1' };
    if (key) headers['authorization'] = `Bearer ${key}`;
    const res = await fetch(url + path(b), { method: 'PUT', headers, body: b.bytes });
    if (res.status !== 201) throw new Error(`PUT ${res.status}: ${await res.text()}`);
    await res.arrayBuffer();
  }
  return (performance.now() - started) / 1000;
}

/** A fresh hub with one enrolled device: its folder, server and the device's key. */
async function freshHub(work: string, name: string): Promise<{ dir: string; server: Server; key: string }> {
  const dir = join(work, `hub-${name}-${randomBytes(3).toString('hex')}`);
  const key = mia(['devices', 'enroll', 'bench', '--data', dir]).trim().split('\n').at(-1) ?? '';
  return { dir, server: await serve(['--hub', '--data', dir]), key };
}

const WAITING = 100_000;

/**
 * Idle rounds (`mia sync now`, nothing new on the hub) of two workstations of one hub: one with
 * an empty inbox, one holding WAITING instance changes that wait for files it will never fetch
 * (studies not assigned to it; written straight into its store, as bench/generate-scale.ts does).
 * Rounds alternate; then one round of the second with its hourly look at every waiting change due.
 */
async function waitingRounds(work: string, rounds: number): Promise<{ empty: number[]; waiting: number[]; sweep: number; retried: string }> {
  const { openDatabase } = await import('#server/store/sqlite.ts');
  const { keepInInbox } = await import('#server/store/sync-log.ts');
  const { setSetting } = await import('#server/store/settings.ts');
  const { waitKey } = await import('#server/sync/wait-keys.ts');
  const hub = await freshHub(work, 'waiting');
  const [quiet, busy] = [join(work, 'ws-quiet'), join(work, 'ws-waiting')];
  try {
    mia(['sync', 'join', hub.server.url, '--data', quiet], hub.key);
    const second = mia(['devices', 'enroll', 'bench-2', '--data', hub.dir]).trim().split('\n').at(-1) ?? '';
    mia(['sync', 'join', hub.server.url, '--data', busy], second);
    for (const dir of [quiet, busy]) mia(['sync', 'now', '--data', dir]);
    const db = openDatabase(busy);
    await db.transaction(async (tx) => {
      for (let i = 0; i < WAITING; i++) {
        const sha256 = createHash('sha256').update(`waiting ${i}`).digest('hex');
        const payload = JSON.stringify({ sha256, size: 33_000, series_uid: `1.2.826.0.1.3680043.10.9.${i >> 7}`, study_uid: `1.2.826.0.1.3680043.10.8.${i >> 9}` });
        await keepInInbox(tx, { change_id: `00000000-0000-7000-8000-${String(i).padStart(12, '0')}`, device_id: 'hub', entity: 'instance', entity_key: `1.2.826.0.1.3680043.10.7.${i}`, op: 'put', hlc: '0000000000000-0000-hub', user_id: null, payload }, `file ${sha256} is not here yet`, waitKey.file(sha256), new Date().toISOString());
      }
    });
    await db.close();
    const timed = (dir: string): { seconds: number; out: string } => {
      const started = performance.now();
      const out = mia(['sync', 'now', '--data', dir]);
      return { seconds: (performance.now() - started) / 1000, out };
    };
    const empty: number[] = [];
    const waiting: number[] = [];
    for (let r = 0; r < rounds; r++) {
      empty.push(timed(quiet).seconds);
      const round = timed(busy);
      if (!round.out.includes(`${WAITING} pulled change(s) waiting`)) throw new Error(`waiting round: ${round.out}`);
      waiting.push(round.seconds);
    }
    // The hourly round: every waiting change looked at again.
    const old = openDatabase(busy);
    await setSetting(old, 'sync.inbox_swept_at', '2000-01-01T00:00:00.000Z');
    await old.close();
    const swept = timed(busy);
    const retried = /; (\d+) tried again this round/.exec(swept.out)?.[1] ?? '?';
    return { empty, waiting, sweep: swept.seconds, retried };
  } finally {
    await stop(hub.server);
    for (const dir of [hub.dir, quiet, busy]) setAside(dir);
  }
}

const percentile = (xs: number[], p: number): number => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)] ?? NaN;

/**
 * Time to converge after a partition heals: a workstation (\`mia serve\`, a round every second)
 * behind the fault proxy; the link goes dark (blackhole: packets held, nothing closed), a reader
 * records a backlog of verdicts, and after 1.5 s the link heals; converged is when the
 * workstation has nothing pending (every change acknowledged by the hub after its commit).
 */
async function convergence(work: string, sizes: readonly number[], runs: number): Promise<Map<number, number[]>> {
  const { startFaultProxy } = await import('../test/helpers/fault-proxy.ts');
  // A seed whose bleed the bundled model finds (2.0.0: 0.72; seed 34000's it no longer does).
  python(['--out', join(work, 'lesion'), '--series', '1', '--slices', '16', '--size', '128', '--modality', 'CT', '--seed', '34002', '--kinds', 'hemorrhage']);
  const hub = await freshHub(work, 'converge');
  const proxy = await startFaultProxy({ host: '127.0.0.1', port: Number(new URL(hub.server.url).port) });
  const ws = join(work, 'ws-converge');
  const out = new Map<number, number[]>();
  let server: Server | undefined;
  try {
    mia(['import', join(work, 'lesion'), '--data', ws]);
    mia(['analyze', '--all', '--data', ws]);
    await miaAsync(['sync', 'join', proxy.url, '--data', ws], hub.key);
    // The reader is the hub's user (verdicts name a person the hub knows); the key the hub gave
    // them comes down to the workstation with the round.
    const key = mia(['keys', 'create', '--role', 'radiologist', '--email', 'reader@ws.bench', '--data', hub.dir]).trim().split('\n').at(-1) ?? '';
    await miaAsync(['sync', 'now', '--data', ws]);
    server = await serve(['--data', ws, '--sync-interval', '1']);
    const call = async (method: string, path: string, body?: unknown): Promise<any> => {
      const res = await fetch(server!.url + path, { method, headers: { authorization: `Bearer ${key}`, 'api-version': '1.1', ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : undefined });
      if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
      return ((await res.json()) as { data: unknown }).data;
    };
    const scans = (await call('GET', '/v1/scans')) as { items: { scan_id: string }[] };
    const result = (await call('GET', `/v1/scans/${scans.items[0]!.scan_id}/results`)) as { findings: { id: string }[] };
    const finding = result.findings[0]?.id;
    if (!finding) throw new Error('the lesion phantom gave no finding to review');
    for (const size of sizes) {
      const times: number[] = [];
      for (let run = 0; run < runs; run++) {
        proxy.set({ blackhole: true });
        for (let i = 0; i < size; i++) await call('PATCH', `/v1/findings/${finding}`, { review: i % 2 === 0 ? 'accepted' : 'rejected' });
        await new Promise((resolve) => setTimeout(resolve, 1500));
        const healed = performance.now();
        proxy.set({});
        for (;;) {
          const status = (await call('GET', '/v1/sync/status')) as { pending: number; state: string };
          if (status.pending === 0 && status.state !== 'syncing') break;
          if (performance.now() - healed > 120_000) throw new Error(`not converged after 120 s: ${JSON.stringify(status)}`);
          await new Promise((resolve) => setTimeout(resolve, 25));
        }
        times.push((performance.now() - healed) / 1000);
      }
      out.set(size, times);
      process.stderr.write(`sync bench: converged ${runs} times with a backlog of ${size}\n`);
    }
  } finally {
    if (server) await stop(server);
    await proxy.close();
    await stop(hub.server);
  }
  return out;
}

function python(args: string[]): void {
  const r = spawnSync('/usr/bin/python3', [PHANTOMS, ...args], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

export async function run(): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), 'mia-bench-sync-'));
  const bareScript = join(work, 'bare-server.mjs');
  writeFileSync(bareScript, BARE_SERVER);
  try {
    // Corpora: 1,000 slices of 128x128 (33 KiB files), 100 of 512x512 (513 KiB), 1,000 series of one slice.
    python(['--out', join(work, 'small'), '--series', '10', '--slices', '100', '--size', '128', '--modality', 'CT', '--seed', '31000']);
    python(['--out', join(work, 'large'), '--series', '2', '--slices', '50', '--size', '512', '--modality', 'CT', '--seed', '32000']);
    python(['--out', join(work, 'scans'), '--series', '1000', '--slices', '1', '--size', '64', '--modality', 'CT', '--seed', '33000', '--kinds', 'none']);
    const blobsOf = (dir: string): Blob[] => listFiles(dir).map((f) => {
      const bytes = readFileSync(f);
      return { sha: createHash('sha256').update(bytes).digest('hex'), bytes };
    });
    const small = blobsOf(join(work, 'small'));
    const large = blobsOf(join(work, 'large'));

    // A workstation holding the small corpus: its outbox is what the row figures push.
    const ws = join(work, 'ws');
    mia(['import', join(work, 'small'), '--data', ws]);

    const blobRows: Record<string, { bucket: number[]; mia: number[]; bare: number[]; bytes: number; files: number }> = {};
    const pushRates: Record<string, number[]> = { '100': [], '500': [] };
    const pullRates: Record<string, number[]> = { '100': [], '500': [] };
    const cold: number[] = [];

    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, blobs] of [['33 KiB', small], ['512 KiB', large]] as const) {
        const row = (blobRows[name] ??= { bucket: [], mia: [], bare: [], bytes: blobs.reduce((n, b) => n + b.bytes.length, 0), files: blobs.length });
        const order = round % 2 === 0 ? ['bucket', 'mia', 'bare'] : ['bare', 'mia', 'bucket'];
        for (const who of order) {
          if (who === 'mia' || who === 'bucket') {
            const hub = await freshHub(work, 'blobs');
            try {
              if (who === 'mia') row.mia.push(row.bytes / 1e6 / (await putAll(hub.server.url, hub.key, blobs, (b) => `/v1/sync/blobs/${b.sha}`)));
              else row.bucket.push(row.bytes / 1e6 / (await bucketAll(hub.server.url, hub.key, blobs)));
            } finally {
              await stop(hub.server);
              setAside(hub.dir);
            }
          } else {
            const dir = join(work, `bare-${round}`);
            mkdirSync(dir, { recursive: true });
            const bare = await bareServer(dir, bareScript);
            try {
              row.bare.push(row.bytes / 1e6 / (await putAll(bare.url, null, blobs, (b) => `/${b.sha}`)));
            } finally {
              await stop(bare);
              setAside(dir);
            }
          }
        }
      }

      // Rows: the workstation's 1,000 instance changes into a hub that has their files.
      for (const batch of [100, 500]) {
        const hub = await freshHub(work, `rows-${batch}`);
        try {
          cpSync(join(ws, 'archive'), join(hub.dir, 'archive'), { recursive: true, filter: (src) => !src.includes('.staging') });
          const folder = await import('#server/data-folder.ts').then((m) => m.openDataFolder(ws));
          let rows;
          try {
            rows = await folder.db.all<{ change_id: string; entity: string; entity_key: string; op: string; hlc: string; user_id: string | null; payload: string }>(
              "SELECT change_id, entity, entity_key, op, hlc, user_id, payload FROM sync_changes WHERE entity = 'instance' ORDER BY seq");
          } finally {
            await folder.close();
          }
          const started = performance.now();
          for (let i = 0; i < rows.length; i += batch) {
            const part = rows.slice(i, i + batch);
            const res = await fetch(hub.server.url + '/v1/sync/push', {
              method: 'POST',
              headers: { authorization: `Bearer ${hub.key}`, 'content-type': 'application/json', 'mia-sync-protocol': '1', 'idempotency-key': randomBytes(16).toString('hex') },
              body: JSON.stringify({ changes: part.map((r) => ({ change_id: r.change_id, entity: r.entity, key: r.entity_key, op: r.op, hlc: r.hlc, user_id: r.user_id, payload: JSON.parse(r.payload) as unknown })) }),
            });
            const body = (await res.json()) as { data: { accepted: number } };
            if (body.data.accepted !== part.length) throw new Error(`push accepted ${body.data.accepted} of ${part.length}`);
          }
          pushRates[String(batch)]!.push(rows.length / ((performance.now() - started) / 1000));

          // A second device pulls them all.
          const reader = mia(['devices', 'enroll', 'reader', '--data', hub.dir]).trim().split('\n').at(-1) ?? '';
          const pulled = performance.now();
          let cursor = '';
          let count = 0;
          for (;;) {
            const res = await fetch(`${hub.server.url}/v1/sync/pull?limit=${batch}${cursor ? `&cursor=${cursor}` : ''}`, { headers: { authorization: `Bearer ${reader}`, 'mia-sync-protocol': '1' } });
            const page = (await res.json()) as { data: { changes: unknown[]; cursor: string; has_more: boolean } };
            count += page.data.changes.length;
            cursor = page.data.cursor;
            if (!page.data.has_more) break;
          }
          if (count !== rows.length) throw new Error(`pulled ${count} of ${rows.length}`);
          pullRates[String(batch)]!.push(count / ((performance.now() - pulled) / 1000));
        } finally {
          await stop(hub.server);
          setAside(hub.dir);
        }
      }

      // A cold initial sync: 1,000 scans from a fresh workstation into an empty hub, as a process.
      const hub = await freshHub(work, 'cold');
      const fresh = join(work, `ws-cold-${round}`);
      try {
        mia(['import', join(work, 'scans'), '--data', fresh]);
        mia(['sync', 'join', hub.server.url, '--data', fresh], hub.key);
        const started = performance.now();
        const out = mia(['sync', 'now', '--data', fresh]);
        cold.push((performance.now() - started) / 1000);
        if (!/pushed 1000 change\(s\) and 1000 file\(s\)/.test(out)) throw new Error(`cold sync: ${out}`);
      } finally {
        await stop(hub.server);
        setAside(hub.dir);
        setAside(fresh);
      }
      process.stderr.write(`sync bench: round ${round + 1} of ${ROUNDS} done\n`);
    }

    const idle = await waitingRounds(work, ROUNDS);
    const sizes = [10, 100, 500];
    const runs = Number(process.env['CONVERGE_RUNS'] ?? '20');
    const converged = await convergence(work, sizes, runs);

    const lines = [
      '## Sync',
      '',
      `${new Date().toISOString().slice(0, 10)}, ${cpus().length} cores, Node ${process.version}; the hub is \`mia serve --hub\` on SQLite in its own process, on loopback; medians of ${ROUNDS} interleaved rounds. \`npm run bench -- sync\`.`,
      '',
      '| instance files | files | mia buckets (POST /v1/sync/blobs, what mia sync now sends) MB/s | mia one by one (PUT /v1/sync/blobs/{sha256}) MB/s | floor: bare server, PUT one by one, write + fsync, MB/s | buckets / floor | one by one / floor |',
      '|---|---|---|---|---|---|---|',
      ...Object.entries(blobRows).map(([name, r]) => `| ${name} | ${r.files} | ${median(r.bucket).toFixed(1)} | ${median(r.mia).toFixed(1)} | ${median(r.bare).toFixed(1)} | ${(median(r.bucket) / median(r.bare)).toFixed(2)}x | ${(median(r.mia) / median(r.bare)).toFixed(2)}x |`),
      '',
      '| rows (1,000 instance changes, files on the hub) | batch of 100 | batch of 500 |',
      '|---|---|---|',
      `| POST /v1/sync/push, rows/s | ${median(pushRates['100']!).toFixed(0)} | ${median(pushRates['500']!).toFixed(0)} |`,
      `| GET /v1/sync/pull by a second device, rows/s | ${median(pullRates['100']!).toFixed(0)} | ${median(pullRates['500']!).toFixed(0)} |`,
      '',
      `Cold initial sync of 1,000 scans (one 64x64 slice each: 1,000 files and 1,000 changes) by \`mia sync now\` into an empty hub: ${median(cold).toFixed(1)} s (rounds: ${cold.map((s) => s.toFixed(1)).join(', ')}).`,
      '',
      `An idle round (\`mia sync now\` as a process, nothing new on the hub), alternating between two workstations of one hub: with nothing waiting ${median(idle.empty).toFixed(2)} s (rounds: ${idle.empty.map((s) => s.toFixed(2)).join(', ')}); holding ${WAITING.toLocaleString('en')} pulled changes that wait for files of studies not assigned to it ${median(idle.waiting).toFixed(2)} s (${idle.waiting.map((s) => s.toFixed(2)).join(', ')}). The round that looks at every waiting change again (once an hour) took ${idle.sweep.toFixed(1)} s and tried ${idle.retried}. Until 2026-11-27 every round tried the whole inbox (6.2 s for 100,000 such changes, measured in process; server/sync/client.ts retryInbox).`,
      '',
      `Time to converge after a partition heals (a workstation's \`mia serve\` with a round every second, behind the fault proxy: the link goes dark, a reader records the backlog of verdicts, the link heals 1.5 s later; converged when nothing is pending), ${runs} runs per backlog:`,
      '',
      '| backlog (verdicts) | p50 s | p95 s | max s |',
      '|---|---|---|---|',
      ...sizes.map((n) => { const t = converged.get(n) ?? []; return `| ${n} | ${percentile(t, 50).toFixed(2)} | ${percentile(t, 95).toFixed(2)} | ${Math.max(...t).toFixed(2)} |`; }),
      '',
      'A pushed instance change is applied by reading its file again with the import\'s parser and reject rules on the hub, so push rows/s is close to the hub\'s import rate, not a row copy.',
      '',
    ];
    return lines.join('\n');
  } finally {
    setAside(work);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) process.stdout.write(await run());
