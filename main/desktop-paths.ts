/**
 * Where the desktop app finds what it ships beside its code, packaged or run from a checkout.
 * Pure functions of their inputs, unit-tested without Electron.
 *
 * The server's own default for bundled models is `new URL('../../models', import.meta.url)`
 * relative to its source file; inside the esbuild bundle (dist-desktop/main.mjs) that resolves
 * above the repository, so main always names the folder explicitly.
 */
import { join } from 'node:path';

export type AppLocation = {
  /** Electron's app.isPackaged. */
  packaged: boolean;
  /** process.resourcesPath: electron-builder's extraResources land there (electron-builder.yml). */
  resourcesPath: string;
  /** The folder of the running bundle: dist-desktop/ in a checkout. */
  bundleDir: string;
};

export function bundledModelsDirs(location: AppLocation): string[] {
  return [location.packaged ? join(location.resourcesPath, 'models') : join(location.bundleDir, '..', 'models')];
}

/**
 * Where `npm run desktop` keeps better-sqlite3 built for Electron: under node_modules/.cache,
 * apart from node_modules/better-sqlite3/build, which the CLI and the tests load under Node.
 * Named by both versions and the platform, so an upgrade of either builds a new copy.
 */
export function electronSqliteDir(root: string, build: { sqlite: string; runtime: 'electron' | 'node'; target: string; platform: string; arch: string }): string {
  return join(root, 'node_modules', '.cache', 'mia-desktop', `better-sqlite3-${build.sqlite}-${build.runtime}-${build.target}-${build.platform}-${build.arch}`);
}

export function electronSqliteBinding(dir: string): string {
  return join(dir, 'build', 'Release', 'better_sqlite3.node');
}
