/**
 * The desktop app's entry sizes libuv's thread pool before anything starts it (main/entry.cjs).
 * Run here under Node, whose loaders Electron's main process uses: the bundle's own `electron`
 * imports fail outside Electron, after the ES module loader has read main.mjs and so started the
 * pool, which is what this counts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = join(import.meta.dirname, '..', '..', '..');
let out = '';
let probe = '';

beforeAll(() => {
  out = mkdtempSync(join(tmpdir(), 'mia-desktop-build-'));
  const built = spawnSync(process.execPath, ['--import', 'tsx', join(root, 'main', 'build.ts'), out], { cwd: root, encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`main/build.ts failed: ${built.stderr}`);
  // Preloaded with -r (CommonJS, synchronous: it starts no pool), it reports the threads at exit.
  probe = join(out, 'probe-threads.cjs');
  writeFileSync(probe, "process.on('exit', () => process.stdout.write('threads ' + require('node:fs').readdirSync('/proc/self/task').length + '\\n'));\n");
}, 120_000);

afterAll(() => rmSync(out, { recursive: true, force: true }));

function threadsOf(entry: string, env: NodeJS.ProcessEnv): number {
  const run = spawnSync(process.execPath, ['-r', probe, join(out, entry)], { env, encoding: 'utf8' });
  const match = /threads (\d+)/.exec(run.stdout);
  if (!match) throw new Error(`no thread count from ${entry}: ${run.stdout} ${run.stderr}`);
  return Number(match[1]);
}

describe.runIf(process.platform === 'linux')('desktop entry', () => {
  it('is what package.json names for Electron to load', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { main?: string };
    expect(pkg.main).toBe('dist-desktop/main.cjs');
  });

  it('runs the app on 32 pool threads unless UV_THREADPOOL_SIZE says otherwise', () => {
    const { UV_THREADPOOL_SIZE: _unset, ...plain } = process.env;
    expect(threadsOf('main.cjs', plain)).toBeGreaterThan(32);
    expect(threadsOf('main.cjs', { ...plain, UV_THREADPOOL_SIZE: '4' })).toBeLessThan(32);
    // Loaded directly, the ES module bundle gets Node's 4: why the entry exists.
    expect(threadsOf('main.mjs', plain)).toBeLessThan(32);
  });
});
