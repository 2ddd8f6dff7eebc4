/**
 * Bundles Electron main (ESM, loaded by the CommonJS entry main/entry.cjs, copied as main.cjs),
 * the worker threads (the analysis inference worker, the WAL checkpoint worker and the export
 * worker: ESM, loaded from beside main.mjs through server/worker-threads.ts) and the preload
 * (CommonJS, as sandboxed preloads must be) into dist-desktop/. Native modules stay external:
 * electron-builder unpacks and rebuilds them.
 */
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';

const root = join(import.meta.dirname, '..');
// Another folder may be named (the tests build into a temporary one).
const out = process.argv[2] ?? join(root, 'dist-desktop');
const external = ['electron', 'better-sqlite3', 'onnxruntime-node'];

for (const [entry, outfile] of [
  [join(root, 'main', 'main.ts'), 'main.mjs'],
  [join(root, 'server', 'analysis', 'inference-worker.ts'), 'inference-worker.mjs'],
  [join(root, 'server', 'store', 'wal-checkpoint-worker.ts'), 'wal-checkpoint-worker.mjs'],
  [join(root, 'server', 'exports', 'export-worker.ts'), 'export-worker.mjs'],
] as const) {
  await build({
    entryPoints: [entry],
    outfile: join(out, outfile),
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node22',
    external,
    // Bundled CommonJS dependencies (express) call require(); give the ESM bundle one.
    banner: { js: "import { createRequire as __miaCreateRequire } from 'node:module'; const require = __miaCreateRequire(import.meta.url);" },
    logLevel: 'warning',
  });
}
await build({
  entryPoints: [join(root, 'main', 'preload.ts')],
  outfile: join(out, 'preload.cjs'),
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'chrome130',
  external: ['electron'],
  logLevel: 'warning',
});
// The entry Electron loads (package.json "main"): it sizes libuv's thread pool, then loads main.mjs.
copyFileSync(join(root, 'main', 'entry.cjs'), join(out, 'main.cjs'));
process.stdout.write(`desktop bundles written to ${out}\n`);
