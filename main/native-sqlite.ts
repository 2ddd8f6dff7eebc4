/**
 * better-sqlite3 built for Electron, for `npm run desktop` from a checkout. npm built
 * node_modules/better-sqlite3 for Node's ABI, which the CLI and the tests load; Electron has
 * its own ABI and refuses that build. Rebuilding in place (electron-rebuild) would break the
 * CLI and the tests, so a copy of the package is built for Electron under node_modules/.cache
 * and handed to the server through MIA_SQLITE_BINDING (better-sqlite3's nativeBinding option,
 * server/store/database.ts). Packaged apps need none of this: electron-builder rebuilds the
 * module inside the package (npmRebuild in electron-builder.yml). onnxruntime-node ships
 * N-API binaries, which Electron loads as they are.
 *
 * First a prebuilt binary (prebuild-install, from the project's GitHub releases), then a build
 * from source against Electron's headers (node-gyp; needs python3, make and a C++20 compiler).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { electronSqliteBinding, electronSqliteDir } from './desktop-paths.ts';

export type SqliteTarget = {
  root: string;
  /** The runtime to build for: Electron's version, or Node's (used to test this file offline). */
  runtime: 'electron' | 'node';
  target: string;
  /** Where node-gyp finds the runtime's headers; for Electron, downloaded from here. */
  distUrl?: string;
  /** A local headers folder instead of downloading (node-gyp --nodedir). */
  nodedir?: string;
  log(line: string): void;
};

/** The package files node-gyp needs; build/ (Node's binary) is deliberately left behind. */
const PACKAGE_ENTRIES = ['package.json', 'binding.gyp', 'src', 'lib', 'deps'];

/**
 * npm passes its configuration to scripts as npm_config_* variables; a `nodedir` or `target`
 * there (this machine's npm sets nodedir=/usr) would make node-gyp build against Node's
 * headers again, so the build runs without them.
 */
export function buildEnvironment(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const clean: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(env)) {
    if (/^npm_config_(nodedir|target|runtime|disturl|dist_url|arch|target_arch|build_from_source)$/i.test(name)) continue;
    clean[name] = value;
  }
  return clean;
}

export function sqliteVersion(root: string): string {
  const pkg = JSON.parse(readFileSync(join(root, 'node_modules', 'better-sqlite3', 'package.json'), 'utf8')) as { version?: unknown };
  if (typeof pkg.version !== 'string') throw new Error('node_modules/better-sqlite3/package.json has no version');
  return pkg.version;
}

function run(command: string, args: readonly string[], cwd: string, log: (line: string) => void): boolean {
  log(`$ ${[command, ...args].join(' ')}`);
  const result = spawnSync(command, args, { cwd, env: buildEnvironment(process.env), stdio: 'inherit' });
  return result.status === 0;
}

/** Returns better_sqlite3.node for `target` and its build folder, building it when missing. */
export function ensureSqliteBinding(options: SqliteTarget): { dir: string; binding: string } {
  const { root, runtime, target, log } = options;
  const dir = electronSqliteDir(root, { sqlite: sqliteVersion(root), runtime, target, platform: process.platform, arch: process.arch });
  const binding = electronSqliteBinding(dir);
  if (existsSync(binding)) return { dir, binding };

  log(`building better-sqlite3 for ${runtime} ${target} in ${dir}`);
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const source = join(root, 'node_modules', 'better-sqlite3');
  for (const entry of PACKAGE_ENTRIES) cpSync(join(source, entry), join(dir, entry), { recursive: true });

  const targetArgs = [`--runtime=${runtime}`, `--target=${target}`, `--arch=${process.arch}`];
  const prebuild = join(root, 'node_modules', 'prebuild-install', 'bin.js');
  const prebuilt = !options.nodedir && existsSync(prebuild) && run(process.execPath, [prebuild, ...targetArgs, `--platform=${process.platform}`, '--verbose'], dir, log);
  if (!prebuilt || !existsSync(binding)) {
    log('no prebuilt binary; building from source with node-gyp');
    const nodeGyp = join(root, 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
    const headers = options.nodedir ? [`--nodedir=${options.nodedir}`] : [`--dist-url=${options.distUrl ?? 'https://electronjs.org/headers'}`];
    run(process.execPath, [nodeGyp, 'rebuild', '--release', ...targetArgs, ...headers], dir, log);
  }
  if (!existsSync(binding)) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`could not build better-sqlite3 for ${runtime} ${target}; see the output above (node-gyp needs python3, make and a C++20 compiler)`);
  }
  return { dir, binding };
}

/**
 * Loads the built binding with the runtime it was built for (Electron run as Node) and opens an
 * in-memory database: a wrong ABI fails here, with a clear message, rather than at app start.
 */
export function checkSqliteBinding(root: string, binding: string, executable: string, env: NodeJS.ProcessEnv = {}): { ok: true } | { ok: false; output: string } {
  const betterSqlite = join(root, 'node_modules', 'better-sqlite3');
  const script = `const D = require(${JSON.stringify(betterSqlite)}); const db = new D(':memory:', { nativeBinding: ${JSON.stringify(binding)} }); db.prepare('select 1').get(); db.close();`;
  const result = spawnSync(executable, ['-e', script], { env: { ...buildEnvironment(process.env), ...env }, encoding: 'utf8' });
  return result.status === 0 ? { ok: true } : { ok: false, output: `${result.stdout ?? ''}${result.stderr ?? ''}${result.error ? String(result.error) : ''}` };
}
