/**
 * Helpers of the fault suite's storage tests: the real `mia serve` as a child process (so a
 * crash shows as its exit, not as a failed test worker), the CLI, a disk filled to the last
 * byte, and file systems mounted for a test (root only; a test says why it skips otherwise).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, writeSync } from 'node:fs';
import { join } from 'node:path';

export const BIN = join(import.meta.dirname, '../../bin/mia.js');

export type ServeProcess = {
  url: string;
  child: ChildProcess;
  /** Resolves with the exit code (or the signal's name) once the process has ended. */
  exited: Promise<number | string | null>;
  alive(): boolean;
  output(): string;
  /** SIGTERM, as an operator stops it; resolves with the exit code. */
  stop(): Promise<number | string | null>;
};

export async function startServe(dataDir: string): Promise<ServeProcess> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data', dataDir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | string | null>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal)));
  const url = await new Promise<string>((resolve, reject) => {
    const look = (): void => {
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match?.[1]) resolve(match[1]);
    };
    child.stdout.on('data', look);
    void exited.then((code) => reject(new Error(`mia serve exited (${String(code)}) before listening:\n${output}`)));
  });
  return {
    url,
    child,
    exited,
    alive: () => child.exitCode === null && child.signalCode === null,
    output: () => output,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      return await exited;
    },
  };
}

/** `mia keys create`: the new key (printed alone on the last line). */
export function createKey(dataDir: string, email: string): string {
  const run = spawnSync(process.execPath, [BIN, 'keys', 'create', '--role', 'admin', '--email', email, '--data', dataDir], {
    encoding: 'utf8',
    timeout: 60_000,
  });
  if (run.status !== 0) throw new Error(`keys create failed: ${run.stderr}`);
  return run.stdout.trimEnd().split('\n').at(-1) ?? '';
}

export type ApiReply = { status: number; json: any; text: string };

export async function call(
  url: string,
  key: string,
  method: string,
  path: string,
  body?: { json: unknown } | { dicom: Uint8Array },
): Promise<ApiReply> {
  const headers: Record<string, string> = { Authorization: `Bearer ${key}` };
  let payload: string | Uint8Array | undefined;
  if (body && 'json' in body) {
    headers['Content-Type'] = 'application/json';
    payload = JSON.stringify(body.json);
  } else if (body) {
    headers['Content-Type'] = 'application/dicom';
    payload = body.dicom;
  }
  const reply = await fetch(`${url}${path}`, { method, headers, body: payload, signal: AbortSignal.timeout(30_000) });
  const text = await reply.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: reply.status, json, text };
}

/**
 * Appends to `file` until the file system refuses (ENOSPC), in ever smaller writes, so that no
 * byte is left and the next write anywhere on it fails. Returns the bytes written.
 */
export function fillDisk(file: string): number {
  const fd = openSync(file, 'a');
  let total = 0;
  try {
    for (const size of [1 << 20, 64 << 10, 4096, 512, 1]) {
      const chunk = Buffer.alloc(size, 0x5a);
      for (;;) {
        try {
          total += writeSync(fd, chunk);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === 'ENOSPC') break;
          throw err;
        }
      }
    }
  } finally {
    closeSync(fd);
  }
  return total;
}

/** Runs a mount-type command as root; returns why it failed, or null. */
export function run(command: string, args: string[]): string | null {
  if (process.getuid?.() !== 0) return `${command} needs root (running as uid ${String(process.getuid?.())})`;
  const result = spawnSync(command, args, { encoding: 'utf8', timeout: 60_000 });
  if (result.error) return `${command} ${args.join(' ')}: ${result.error.message}`;
  if (result.status !== 0) return `${command} ${args.join(' ')} exited ${String(result.status)}: ${result.stderr.trim()}`;
  return null;
}

/** Waits until `check` holds, polling; fails with `what` after `ms`. */
export async function eventually(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The DICOM files under `dir`, in a stable order. */
export function dicomFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.dcm'))
    .map((entry) => join(entry.parentPath, entry.name))
    .sort();
}
