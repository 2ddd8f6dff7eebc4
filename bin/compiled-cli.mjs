// The CLI compiled once and kept in dist/cli/, rebuilt when a source is newer than it.
//
// Through tsx, every module of a command is resolved and transpiled on a loader thread at each
// start: `mia import` spent 0.6-0.8 s there before its first file (CPU profile, 2026-11-26),
// a third of importing 2,000 files. A compiled copy loads in a fraction of that. There is still
// no build step to run: the first start after a change builds it (esbuild, which tsx brings),
// and anything that goes wrong falls back to tsx.
//
// Code splitting keeps each command's modules (and their packages: express, onnxruntime) in
// chunks loaded only when that command runs. The copy sits two folders below the package root,
// as server/<area>/*.ts do, so the paths modules resolve from import.meta.url (../../models,
// ../../renderer/dist, node_modules) still lead to the same places, and the worker threads (the
// analysis worker, the WAL checkpointer, the export renderer) are compiled beside it, where their
// starters look outside tsx (server/worker-threads.ts).
import { existsSync, mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'dist', 'cli');
const ENTRY = join(OUT, 'main.mjs');
const SOURCES = ['server', 'common'];
const INPUTS = ['package.json', 'bin/package.json', 'bin/compiled-cli.mjs'];
/** Entry points beside main.mjs: worker threads, each started from its own file. */
const WORKERS = {
  'inference-worker': 'server/analysis/inference-worker.ts',
  'wal-checkpoint-worker': 'server/store/wal-checkpoint-worker.ts',
  'export-worker': 'server/exports/export-worker.ts',
};
const ENTRIES = new Set(['main.mjs', ...Object.keys(WORKERS).map((name) => `${name}.mjs`)]);

/**
 * Packages compiled into the chunks; every other one is loaded from node_modules as it is. zod is
 * 99 module files that Node's loader resolved, read and linked one by one at every start: 127-140 ms
 * of a one-file `mia import` of ~500 ms, against 65 ms for the same code as one file (2026-11-28).
 */
const BUNDLED_PACKAGES = new Set(['zod']);

/** Bare imports stay imports, but for BUNDLED_PACKAGES (and the package's own #imports). */
const externalPackages = {
  name: 'external-packages',
  setup(build) {
    build.onResolve({ filter: /^[^./#]/ }, (args) => {
      const parts = args.path.split('/');
      const name = args.path.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
      return BUNDLED_PACKAGES.has(name) ? undefined : { path: args.path, external: true };
    });
  },
};

function newestSource() {
  let newest = 0;
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.name.endsWith('.ts') || entry.name.endsWith('.json')) newest = Math.max(newest, statSync(path).mtimeMs);
    }
  };
  for (const dir of SOURCES) walk(join(ROOT, dir));
  for (const file of INPUTS) newest = Math.max(newest, statSync(join(ROOT, file)).mtimeMs);
  return newest;
}

async function build() {
  const { build: esbuild } = await import('esbuild');
  mkdirSync(OUT, { recursive: true });
  // Built beside, then moved in file by file: another mia starting meanwhile sees either the
  // old entry or the new one, each with its own chunks (named by content, never overwritten
  // with other content).
  const temp = mkdtempSync(join(OUT, '.build-'));
  try {
    await esbuild({
      entryPoints: { main: join(ROOT, 'server/cli/main.ts'), ...Object.fromEntries(Object.entries(WORKERS).map(([name, path]) => [name, join(ROOT, path)])) },
      outdir: temp,
      outExtension: { '.js': '.mjs' },
      bundle: true,
      splitting: true,
      format: 'esm',
      platform: 'node',
      target: 'node20',
      plugins: [externalPackages],
      logLevel: 'silent',
    });
    const files = readdirSync(temp);
    for (const name of files.filter((f) => !ENTRIES.has(f))) renameSync(join(temp, name), join(OUT, name));
    // The workers before main: a mia that sees the new main finds its workers in place.
    for (const name of Object.keys(WORKERS)) renameSync(join(temp, `${name}.mjs`), join(OUT, `${name}.mjs`));
    renameSync(join(temp, 'main.mjs'), ENTRY);
  } finally {
    rmSync(temp, { recursive: true, force: true });
  }
  removeStale(new Set(readdirSync(OUT)));
}

const WEEK_MS = 7 * 24 * 3600 * 1000;

/**
 * Chunks of earlier builds, and builds a killed process left, once a week old: a mia started
 * before a rebuild (a server) may still load its own chunks later, so nothing recent goes.
 */
function removeStale(names) {
  const now = Date.now();
  for (const name of names) {
    if (ENTRIES.has(name)) continue;
    const path = join(OUT, name);
    try {
      if (now - statSync(path).mtimeMs > WEEK_MS) rmSync(path, { recursive: true, force: true });
    } catch {
      // Removed by another mia meanwhile.
    }
  }
}

/** The CLI's main(): the compiled copy when it is current (or can be made so), else through tsx. */
export async function loadCli() {
  if (process.env.MIA_CLI_FROM_SOURCE !== '1') {
    try {
      if (!existsSync(ENTRY) || statSync(ENTRY).mtimeMs < newestSource()) await build();
      return await import(pathToFileURL(ENTRY).href);
    } catch {
      // No esbuild, a read-only install, a build error: the sources still run through tsx.
    }
  }
  const { register } = await import('tsx/esm/api');
  register();
  return await import('../server/cli/main.ts');
}
