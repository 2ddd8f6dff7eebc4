/**
 * kill -9 at a progress point rather than at a clock time, so a kill lands where a test means it
 * to on a busy machine too. The test polls what the process has done (a read-only look at its
 * data folder), and once that is far enough, stops the process (SIGSTOP), looks again while it
 * cannot move, and kills it: the value returned is exactly what the process had done when it
 * died. Linux only (/proc), as the rest of the fault suite.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';

const BIN = join(import.meta.dirname, '../../bin/mia.js');
const POLL_MS = 5;

export type MiaProcess = {
  child: ChildProcess;
  pid: number;
  /** Exit code, or the name of the signal that ended it. */
  exited: Promise<number | string | null>;
  output(): string;
};

/** Starts `mia ARGS --data DIR` without waiting for it. */
export function spawnMia(args: readonly string[], dataDir: string): MiaProcess {
  const child = spawn(process.execPath, [BIN, ...args, '--data', dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  if (child.pid === undefined) throw new Error('mia did not start');
  return { child, pid: child.pid, exited, output: () => output };
}

function ended(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** The scheduler's state letter of a process (R, S, D, T, Z...), or null once it is gone. */
function processState(pid: number): string | null {
  try {
    // "pid (comm) S ...": comm may hold spaces and parentheses, so read after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return null;
  }
}

async function stopped(pid: number): Promise<boolean> {
  for (;;) {
    const state = processState(pid);
    if (state === 'T' || state === 't') return true;
    if (state === null || state === 'Z' || state === 'X') return false;
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * Polls `observe` until `ready` holds of what it returns, then stops the process (SIGSTOP) and
 * checks again while it cannot move. Resolves with the value observed with the process stopped
 * (the caller kills it or lets it go on with SIGCONT), or undefined when it ended by itself first.
 */
export async function stopWhen<T>(
  child: ChildProcess,
  observe: () => T,
  ready: (value: T) => boolean,
  what: string,
  timeoutMs = 120_000,
): Promise<T | undefined> {
  const pid = child.pid;
  if (pid === undefined) throw new Error('no process to stop');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (ended(child)) return undefined;
    if (ready(observe())) {
      if (!child.kill('SIGSTOP') || !(await stopped(pid))) return undefined;
      const value = observe();
      if (ready(value)) return value;
      child.kill('SIGCONT');
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}

/** kill -9 once `ready` holds (see stopWhen); resolves with the value observed at the kill. */
export async function killWhen<T>(
  child: ChildProcess,
  observe: () => T,
  ready: (value: T) => boolean,
  what: string,
  timeoutMs = 120_000,
): Promise<T | undefined> {
  const exited = ended(child) ? Promise.resolve() : new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const value = await stopWhen(child, observe, ready, what, timeoutMs);
  if (value !== undefined) child.kill('SIGKILL');
  await exited;
  return value;
}

/** One number from the data folder's database, read-only; 0 while the database or table does not exist yet. */
export function readCount(dataDir: string, query: string): number {
  const file = join(dataDir, 'mia.sqlite');
  if (!existsSync(file)) return 0;
  let db: BetterSqlite3.Database | undefined;
  try {
    db = new BetterSqlite3(file, { readonly: true });
    const row = db.prepare(query).pluck().get();
    return typeof row === 'number' ? row : 0;
  } catch (err) {
    // Before the first migration ran (or the WAL files appeared): nothing done yet.
    if (err instanceof Error && /no such table|unable to open|SQLITE_CANTOPEN/i.test(err.message)) return 0;
    throw err;
  } finally {
    db?.close();
  }
}

/** Temporary archive files anywhere under the data folder's archive (names .*.tmp). */
export function archiveTempFiles(dataDir: string): string[] {
  const root = join(dataDir, 'archive');
  if (!existsSync(root)) return [];
  return readdirSync(root, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.startsWith('.') && entry.name.endsWith('.tmp'))
    .map((entry) => join(entry.parentPath, entry.name));
}
