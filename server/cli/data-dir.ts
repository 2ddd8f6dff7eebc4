/**
 * The default data folder: the OS's per-user application data location, the same folder the
 * desktop app's Electron `userData` path resolves to, so the CLI and the app share one archive.
 */
import { homedir } from 'node:os';
import { join } from 'node:path';

export function defaultDataDir(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform): string {
  if (env['MIA_DATA']) return env['MIA_DATA'];
  if (platform === 'win32') return join(env['APPDATA'] ?? join(homedir(), 'AppData', 'Roaming'), 'mia');
  if (platform === 'darwin') return join(homedir(), 'Library', 'Application Support', 'mia');
  return join(env['XDG_CONFIG_HOME'] ?? join(homedir(), '.config'), 'mia');
}
