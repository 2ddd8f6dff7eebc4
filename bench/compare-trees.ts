/**
 * The workstation path before and after a change of the store, in one run (issue 12: "the
 * workstation path may not get slower"). Each checkout serves and imports with its own code:
 * GET /v1/scan/results at 50 connections against each tree's bench/serve-fixture.ts (1,000
 * analysed scans), and `mia import` of one phantom corpus as a process into a fresh data folder,
 * the trees alternating round by round so both meet the same machine state.
 *
 *   ROUNDS=3 node --import tsx bench/compare-trees.ts BASELINE_CHECKOUT [OTHER_CHECKOUT...]
 *
 * (default other: this checkout). Ratios are against the first.
 * A checkout needs node_modules (a symlink to this one's will do) and must be at a schema the
 * other can read (each builds its own folders here, so any two mia versions compare).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import autocannon from 'autocannon';
import { firstLine } from './child-line.ts';
import { setAside } from './set-aside.ts';

const args = process.argv.slice(2);
if (args.length === 0) throw new Error('usage: compare-trees.ts BASELINE_CHECKOUT [OTHER_CHECKOUT...]');
if (args.length === 1) args.push('.');
const trees = args.map((dir) => ({ name: dir, dir: resolve(dir) }));
const ROUNDS = Number(process.env['ROUNDS'] ?? '3');

async function serve(dir: string): Promise<{ url: string; key: string; child: ChildProcess }> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(dir, 'bench/serve-fixture.ts'), 'mia', '1000'], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
  const line = await firstLine(child, `fixture in ${dir}`);
  const { url, key } = JSON.parse(line) as { url: string; key: string };
  return { url, key, child };
}

async function results(dir: string, path: string): Promise<{ rps: number; p50: number; p99: number }> {
  const server = await serve(dir);
  try {
    const r = await autocannon({ url: server.url + path, connections: 50, duration: 10, headers: { Authorization: `Bearer ${server.key}` } });
    if (r.non2xx > 0) throw new Error(`${dir}: ${r.non2xx} non-2xx answers`);
    return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99 };
  } finally {
    server.child.kill('SIGINT');
  }
}

function importSeconds(dir: string, corpus: string): number {
  const data = mkdtempSync(join(tmpdir(), 'mia-compare-data-'));
  try {
    const started = performance.now();
    const run = spawnSync(process.execPath, [join(dir, 'bin/mia.js'), 'import', corpus, '--data', data], { cwd: dir, encoding: 'utf8' });
    if (run.status !== 0) throw new Error(`${dir}: mia import failed: ${run.stderr}`);
    return (performance.now() - started) / 1000;
  } finally {
    setAside(data);
  }
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

const work = mkdtempSync(join(tmpdir(), 'mia-compare-'));
try {
  const corpus = join(work, 'corpus');
  const made = spawnSync('/usr/bin/python3', ['models/mia-phantom-detector/phantoms.py', '--out', corpus, '--series', '25', '--slices', '80', '--seed', '20009900', '--modality', 'both'], { encoding: 'utf8' });
  if (made.status !== 0) throw new Error(`phantoms.py failed: ${made.stderr}`);
  const seen = new Map<string, { limit50: number[]; p99_50: number[]; limit500: number[]; p99_500: number[]; importS: number[] }>();
  for (const tree of trees) seen.set(tree.name, { limit50: [], p99_50: [], limit500: [], p99_500: [], importS: [] });
  for (let round = 0; round < ROUNDS; round++) {
    // Each round in another order, so no tree always follows the same one.
    for (const tree of round % 2 === 0 ? trees : [...trees].reverse()) {
      const s = seen.get(tree.name);
      if (!s) continue;
      const small = await results(tree.dir, '/v1/scan/results');
      const large = await results(tree.dir, '/v1/scan/results?limit=500');
      s.limit50.push(small.rps);
      s.p99_50.push(small.p99);
      s.limit500.push(large.rps);
      s.p99_500.push(large.p99);
      s.importS.push(importSeconds(tree.dir, corpus));
      process.stderr.write(`round ${round + 1} ${tree.name}: ${Math.round(small.rps)} req/s, limit=500 ${Math.round(large.rps)} req/s, import ${s.importS.at(-1)?.toFixed(2)} s\n`);
    }
  }
  const base = seen.get(trees[0]?.name ?? '');
  const lines = ['| tree | results limit 50 req/s | p99 ms | limit=500 req/s | p99 ms | mia import 2,000 files s |', '|---|---|---|---|---|---|'];
  for (const [name, s] of seen) {
    const ratio = (value: number, of: number[] | undefined): string => (of && name !== trees[0]?.name ? ` (${(value / median(of)).toFixed(2)}x)` : '');
    lines.push(
      `| ${name} | ${Math.round(median(s.limit50))}${ratio(median(s.limit50), base?.limit50)} | ${median(s.p99_50)} | ${Math.round(median(s.limit500))}${ratio(median(s.limit500), base?.limit500)} | ${median(s.p99_500)} | ${median(s.importS).toFixed(2)}${ratio(median(s.importS), base?.importS)} |`,
    );
  }
  process.stdout.write(`Medians of ${ROUNDS} interleaved rounds, ${new Date().toISOString().slice(0, 10)}, Node ${process.version}:\n\n${lines.join('\n')}\n`);
} finally {
  setAside(work);
}
