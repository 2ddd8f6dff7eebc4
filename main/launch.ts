/** `npm run desktop`: runs Electron on the bundles when its binary was downloaded. */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(import.meta.dirname, '..');
const pathFile = join(root, 'node_modules', 'electron', 'path.txt');

export function electronBinary(): string | null {
  if (!existsSync(pathFile)) return null;
  const binary = join(root, 'node_modules', 'electron', 'dist', readFileSync(pathFile, 'utf8').trim());
  return existsSync(binary) ? binary : null;
}

const binary = electronBinary();
if (!binary) {
  process.stderr.write('Electron binary not installed (ELECTRON_SKIP_BINARY_DOWNLOAD); use npm start for the browser UI.\n');
  process.exit(2);
}
const child = spawn(binary, [join(root, 'dist-desktop', 'main.mjs')], { stdio: 'inherit' });
child.on('exit', (code) => process.exit(code ?? 0));
