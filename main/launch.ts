/**
 * `npm run desktop`: runs Electron on the bundles from a checkout, after making what Electron
 * needs that `npm install` may have skipped: the Electron binary (when installed with
 * ELECTRON_SKIP_BINARY_DOWNLOAD) and better-sqlite3 built for Electron's ABI (native-sqlite.ts),
 * whose path goes to the app as MIA_SQLITE_BINDING. Both need the internet once, then are cached.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { checkSqliteBinding, ensureSqliteBinding } from './native-sqlite.ts';

const root = join(import.meta.dirname, '..');
const electronDir = join(root, 'node_modules', 'electron');
const pathFile = join(electronDir, 'path.txt');
const log = (line: string) => process.stderr.write(`[desktop] ${line}\n`);

function electronBinary(): string | null {
  if (!existsSync(pathFile)) return null;
  const binary = join(electronDir, 'dist', readFileSync(pathFile, 'utf8').trim());
  return existsSync(binary) ? binary : null;
}

function electronVersion(): string {
  const pkg = JSON.parse(readFileSync(join(electronDir, 'package.json'), 'utf8')) as { version?: unknown };
  if (typeof pkg.version !== 'string') throw new Error('node_modules/electron/package.json has no version');
  return pkg.version;
}

/** Electron's own installer, which `npm install` skips under ELECTRON_SKIP_BINARY_DOWNLOAD. */
function installElectron(): string {
  const existing = electronBinary();
  if (existing) return existing;
  log(`downloading the Electron ${electronVersion()} binary (node node_modules/electron/install.js)`);
  const env = { ...process.env };
  delete env['ELECTRON_SKIP_BINARY_DOWNLOAD'];
  const result = spawnSync(process.execPath, [join(electronDir, 'install.js')], { cwd: electronDir, env, stdio: 'inherit' });
  const binary = electronBinary();
  if (result.status !== 0 || !binary) {
    throw new Error('could not download the Electron binary (needs the internet once; or set electron_mirror). The browser UI works without it: npm start.');
  }
  return binary;
}

function main(): void {
  const binary = installElectron();
  const version = electronVersion();
  let { dir, binding } = ensureSqliteBinding({ root, runtime: 'electron', target: version, log });
  let check = checkSqliteBinding(root, binding, binary, { ELECTRON_RUN_AS_NODE: '1' });
  if (!check.ok) {
    // A stale or broken copy (an interrupted build): build it once more from scratch.
    log(`the Electron build of better-sqlite3 does not load:\n${check.output}\nrebuilding it`);
    rmSync(dir, { recursive: true, force: true });
    ({ dir, binding } = ensureSqliteBinding({ root, runtime: 'electron', target: version, log }));
    check = checkSqliteBinding(root, binding, binary, { ELECTRON_RUN_AS_NODE: '1' });
    if (!check.ok) throw new Error(`better-sqlite3 built for Electron ${version} does not load:\n${check.output}`);
  }
  const child = spawn(binary, [join(root, 'dist-desktop', 'main.cjs')], { stdio: 'inherit', env: { ...process.env, MIA_SQLITE_BINDING: binding } });
  child.on('exit', (code) => process.exit(code ?? 0));
}

try {
  main();
} catch (error) {
  log(error instanceof Error ? error.message : String(error));
  process.exit(2);
}
