/**
 * The sync suite's parts, all real: `mia serve --hub` and the `mia` CLI as processes on their
 * own data folders, workstations reaching the hub through the fault proxy, and reads of a
 * workstation's SQLite file once its commands have ended.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { openDataFolder } from '#server/data-folder.ts';
import { readDigestRows } from '#server/store/sync-digest.ts';
import { computeDigest, type Digest } from '#server/sync/digest.ts';

export const BIN = join(import.meta.dirname, '../../bin/mia.js');

export type Run = { status: number | null; stdout: string; stderr: string };

/**
 * Debian's faketime forks the command and does not pass signals on: killing it alone left the
 * workstation's `mia serve` running after the test (found piling up after CI runs). Processes
 * under faketime are spawned in their own group, and the whole group gets the signal.
 */
function killProcess(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.spawnargs[0] === 'faketime' && child.pid !== undefined) {
    try {
      process.kill(-child.pid, signal);
      return;
    } catch {
      // The group is gone already.
    }
  }
  child.kill(signal);
}

/**
 * One `mia` command as a process; `input` goes to its standard input. `clockOffset` runs it under
 * Debian's faketime (e.g. '+10m', '+2d'): its wall clock is off, as a workstation's can be; the
 * monotonic clock its timers use is left alone.
 */
export async function mia(args: readonly string[], options: { input?: string; timeoutMs?: number; clockOffset?: string } = {}): Promise<Run> {
  const child = options.clockOffset
    ? spawn('faketime', ['-f', options.clockOffset, process.execPath, BIN, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, FAKETIME_DONT_FAKE_MONOTONIC: '1' }, detached: true })
    : spawn(process.execPath, [BIN, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  child.stdin.end(options.input ?? '');
  const timer = setTimeout(() => killProcess(child, 'SIGKILL'), options.timeoutMs ?? 120_000);
  const status = await new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  clearTimeout(timer);
  return { status, stdout, stderr };
}

/** A `mia` command left running, for a test that kills it (kill -9 mid-round). */
export function miaProcess(args: readonly string[]): { child: ChildProcess; exited: Promise<number | string | null> } {
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ['ignore', 'ignore', 'ignore'] });
  return { child, exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal))) };
}

export type Hub = { url: string; port: number; child: ChildProcess; exited: Promise<unknown>; output(): string; stop(signal?: NodeJS.Signals): Promise<void> };

/** Where a hub keeps its data: the folder, and its PostgreSQL when the suite runs on one. */
export type HubPlace = { dataDir: string; databaseUrl: string | null };

/** The options that point a `mia` command at the hub's data. */
export function hubArgs(place: HubPlace): string[] {
  return ['--data', place.dataDir, ...(place.databaseUrl ? ['--database', place.databaseUrl] : [])];
}

/** `mia serve --hub` on the place's SQLite folder or PostgreSQL. */
export async function startHub(place: HubPlace, port = 0): Promise<Hub> {
  return await startServe(['--hub', '--port', String(port), ...hubArgs(place)]);
}

/**
 * A workstation's `mia serve`; with an interval of 0 its background rounds are off and the test
 * says when to sync. `clockOffset` runs it under faketime, its wall clock that far off.
 */
export async function startWorkstation(dataDir: string, syncIntervalSeconds = 0, clockOffset?: string): Promise<Hub> {
  return await startServe(['--port', '0', '--sync-interval', String(syncIntervalSeconds), '--data', dataDir], clockOffset);
}

async function startServe(args: readonly string[], clockOffset?: string): Promise<Hub> {
  const child = clockOffset
    ? spawn('faketime', ['-f', clockOffset, process.execPath, BIN, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, FAKETIME_DONT_FAKE_MONOTONIC: '1' }, detached: true })
    : spawn(process.execPath, [BIN, 'serve', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', () => {
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match?.[1]) resolve(match[1]);
    });
    void exited.then(() => reject(new Error(`mia serve exited before listening:\n${output}`)));
  });
  return {
    url,
    port: Number(new URL(url).port),
    child,
    exited,
    output: () => output,
    stop: async (signal = 'SIGTERM') => {
      if (child.exitCode === null && child.signalCode === null) killProcess(child, signal);
      await exited;
    },
  };
}

export function lastLine(text: string): string {
  return text.trimEnd().split('\n').at(-1) ?? '';
}

/** A data folder's digest of the given studies (all when null), read from its database. */
export async function digestOf(dataDir: string, studies: readonly string[] | null, databaseUrl: string | null = null): Promise<Digest> {
  const folder = await openDataFolder(dataDir, { databaseUrl });
  try {
    return await computeDigest(folder.db, studies);
  } finally {
    await folder.close();
  }
}

/** The lines a digest hashes, for a failure message that names the rows that differ. */
export async function digestDifference(a: { dir: string; url?: string | null }, b: { dir: string; url?: string | null }, studies: readonly string[] | null): Promise<string[]> {
  const lines = async (p: { dir: string; url?: string | null }): Promise<Set<string>> => {
    const folder = await openDataFolder(p.dir, { databaseUrl: p.url ?? null });
    try {
      const rows = await readDigestRows(folder.db, studies);
      return new Set([...rows.instances, ...rows.analyses, ...rows.reviews, ...rows.reports]);
    } finally {
      await folder.close();
    }
  };
  const [x, y] = [await lines(a), await lines(b)];
  return [...[...x].filter((l) => !y.has(l)).map((l) => `only in ${a.dir}: ${l}`), ...[...y].filter((l) => !x.has(l)).map((l) => `only in ${b.dir}: ${l}`)];
}

export async function queryFolder<T>(dataDir: string, sql: string, params: unknown[] = [], databaseUrl: string | null = null): Promise<T[]> {
  const folder = await openDataFolder(dataDir, { databaseUrl });
  try {
    return await folder.db.all<T>(sql, params);
  } finally {
    await folder.close();
  }
}

export type Reply = { status: number; json: any; text: string };

export async function request(url: string, key: string, method: string, path: string, options: { body?: unknown; headers?: Record<string, string> } = {}): Promise<Reply> {
  const headers: Record<string, string> = { authorization: `Bearer ${key}`, ...options.headers };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url + path, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body), signal: AbortSignal.timeout(30_000) });
  const text = await res.text();
  let json: unknown = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON
  }
  return { status: res.status, json, text };
}
