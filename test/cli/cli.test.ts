/** The `mia` command as a user runs it: a real process on a real data folder. */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const BIN = join(import.meta.dirname, '../../bin/mia.js');
const dataDir = mkdtempSync(join(tmpdir(), 'mia-cli-'));

function mia(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [BIN, ...args, '--data', dataDir], { encoding: 'utf8', timeout: 60_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

function lastLine(text: string): string {
  return text.trimEnd().split('\n').at(-1) ?? '';
}

async function withServe<T>(work: (url: string, pid: number) => Promise<T>, env: NodeJS.ProcessEnv = process.env): Promise<T> {
  const child = spawn(process.execPath, [BIN, 'serve', '--port', '0', '--data', dataDir], { stdio: ['ignore', 'pipe', 'pipe'], env });
  try {
    const url = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const match = /listening on (http:\/\/\S+)/.exec(out);
        if (match?.[1]) resolve(match[1]);
      });
      child.once('exit', (code) => reject(new Error(`serve exited ${code}`)));
    });
    return await work(url, child.pid ?? 0);
  } finally {
    child.kill('SIGTERM');
    await new Promise((resolve) => child.once('exit', resolve));
  }
}

const issued: string[] = [];

afterAll(() => {
  rmSync(dataDir, { recursive: true, force: true });
});

describe('mia CLI', () => {
  it('keys create prints the key alone on the last line; it works against mia serve', async () => {
    const created = mia('keys', 'create', '--role', 'admin', '--email', 'head@hospital.test');
    expect(created.status).toBe(0);
    const key = lastLine(created.stdout);
    expect(key).toMatch(/^mia_[0-9A-Za-z]{49}$/);
    issued.push(key);
    await withServe(async (url) => {
      expect(url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const me = await fetch(`${url}/v1/auth/me`, { headers: { Authorization: `Bearer ${key}` } });
      expect(((await me.json()) as { data: { user: { email: string } } }).data.user.email).toBe('head@hospital.test');
      // A CLI command while the server runs on the same folder.
      const second = mia('keys', 'create', '--role', 'radiologist', '--email', 'reader@hospital.test', '--scopes', 'write:reports');
      expect(second.status).toBe(0);
      issued.push(lastLine(second.stdout));
      const reader = await fetch(`${url}/v1/auth/me`, { headers: { Authorization: `Bearer ${lastLine(second.stdout)}` } });
      expect(((await reader.json()) as { data: { user: { scopes: string[] } } }).data.user.scopes).toEqual(['read:scans', 'read:reports', 'write:reports']);
    });
  });

  it('keys list shows ids and prefixes but never a key; users list shows users', () => {
    const list = mia('keys', 'list');
    expect(list.status).toBe(0);
    expect(list.stdout).toMatch(/key_[0-9a-f]{24}/);
    for (const key of issued) expect(list.stdout).not.toContain(key);
    const users = mia('users', 'list');
    expect(users.stdout).toContain('head@hospital.test');
    expect(users.stdout).toContain('reader@hospital.test');
  });

  it('keys rotate prints a new key; keys revoke revokes', () => {
    const id = /(key_[0-9a-f]{24})/.exec(mia('keys', 'list').stdout)?.[1] ?? '';
    const rotated = mia('keys', 'rotate', id);
    expect(rotated.status).toBe(0);
    expect(lastLine(rotated.stdout)).toMatch(/^mia_/);
    expect(rotated.stderr).toMatch(/works until/);
    issued.push(lastLine(rotated.stdout));
    const revoked = mia('keys', 'revoke', id);
    expect(revoked.status).toBe(0);
    expect(mia('keys', 'list').stdout).toMatch(new RegExp(`${id}.*revoked`));
  });

  it('keys create --replace leaves one live key of that name (a key per demo session)', async () => {
    const session = (): { key: string; id: string } => {
      const run = mia('keys', 'create', '--role', 'admin', '--email', 'demo@hospital.test', '--name', 'demo session', '--replace');
      expect(run.status).toBe(0);
      issued.push(lastLine(run.stdout));
      return { key: lastLine(run.stdout), id: /key (key_[0-9a-f]{24})/.exec(run.stderr)?.[1] ?? '' };
    };
    const first = session();
    const second = session();
    const list = mia('keys', 'list').stdout;
    expect(list).toMatch(new RegExp(`${first.id}.*revoked`));
    expect(list).toMatch(new RegExp(`${second.id}.*active`));
    await withServe(async (url) => {
      const me = (key: string) => fetch(`${url}/v1/auth/me`, { headers: { Authorization: `Bearer ${key}` } }).then((r) => r.status);
      expect(await me(first.key)).toBe(401);
      expect(await me(second.key)).toBe(200);
    });
  });

  it('explains bad usage with a non-zero exit', () => {
    const bad = mia('keys', 'create', '--role', 'janitor', '--email', 'x@y.org');
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/--role must be one of radiologist, data_engineer, admin/);
    expect(mia('frobnicate').status).toBe(2);
    const analyze = mia('analyze');
    expect(analyze.status).toBe(1);
    expect(analyze.stderr).toMatch(/--all or at least one SCAN_ID/);
    const port = mia('serve', '--port', 'abc');
    expect(port.status).toBe(1);
    expect(port.stderr).toMatch(/^mia: --port abc: /);
    expect(port.stderr).not.toMatch(/ZodError|\n\s+at /);
  });

  it('says so plainly when the port is taken', async () => {
    await withServe(async (url) => {
      const taken = mia('serve', '--port', new URL(url).port);
      expect(taken.status).toBe(1);
      expect(taken.stderr).toMatch(/port \d+ on 127\.0\.0\.1 is already in use/);
    });
  });

  // Imports and the DICOM receiver fsync every archived file on libuv's pool, and concurrent
  // fsyncs share the disk's journal commits: on a slow disk Node's default of 4 threads made an
  // import of 2,000 files 4x slower than 32 (bin/mia.js). The pool starts whole, so a running
  // server's threads show its size.
  it.runIf(process.platform === 'linux')('runs its file work on 32 threads unless UV_THREADPOOL_SIZE says otherwise', async () => {
    const threads = (pid: number): number => readdirSync(`/proc/${pid}/task`).length;
    const { UV_THREADPOOL_SIZE: _unset, ...plain } = process.env;
    expect(await withServe(async (_url, pid) => threads(pid), plain)).toBeGreaterThan(32);
    expect(await withServe(async (_url, pid) => threads(pid), { ...plain, UV_THREADPOOL_SIZE: '4' })).toBeLessThan(32);
  });

  it('leaves no issued key anywhere in the data folder (database, WAL, logs)', () => {
    const files: string[] = [];
    const walk = (dir: string): void => {
      for (const name of readdirSync(dir)) {
        const path = join(dir, name);
        if (statSync(path).isDirectory()) walk(path);
        else files.push(path);
      }
    };
    walk(dataDir);
    expect(files.some((f) => f.endsWith('mia.sqlite'))).toBe(true);
    expect(files.some((f) => f.endsWith('mia.log'))).toBe(true);
    // Patient data, logs and the pseudonym secret: readable by this account only.
    for (const path of [...files, join(dataDir, 'logs')]) {
      expect((statSync(path).mode & 0o077).toString(8), path).toBe('0');
    }
    for (const file of files) {
      const content = readFileSync(file).toString('latin1');
      for (const key of issued) {
        expect(content.includes(key), `${key.slice(0, 8)}… found in ${file}`).toBe(false);
        // Nor the random part alone, in case something stripped the prefix.
        expect(content.includes(key.slice(4, 30))).toBe(false);
      }
    }
  });
});
