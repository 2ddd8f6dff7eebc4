/**
 * Shared helpers for the DICOM tests: where the pydicom corpus lives, and running Debian's
 * pydicom (through /usr/bin/python3, not whatever `python3` is first on PATH) as the
 * reference reader. Missing Debian packages fail loudly instead of skipping.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const CORPUS = '/usr/lib/python3/dist-packages/pydicom/data/test_files';
export const PYTHON = '/usr/bin/python3';
const SCRIPT = fileURLToPath(new URL('./pydicom-reference.py', import.meta.url));

export function requireDebianTools(tools: Array<{ path: string; pkg: string }>): void {
  const missing = tools.filter((t) => !existsSync(t.path));
  if (missing.length > 0) {
    throw new Error(`missing Debian packages for the DICOM tests: ${missing.map((t) => `${t.path} (apt-get install ${t.pkg})`).join(', ')}`);
  }
}

export function requirePydicom(withGdcm = false): void {
  requireDebianTools([
    { path: PYTHON, pkg: 'python3' },
    { path: CORPUS, pkg: 'python3-pydicom' },
  ]);
  const modules = withGdcm ? 'import pydicom, numpy, gdcm' : 'import pydicom, numpy';
  try {
    execFileSync(PYTHON, ['-c', modules], { stdio: 'pipe' });
  } catch {
    throw new Error(`${PYTHON} cannot "${modules}": apt-get install python3-pydicom python3-numpy${withGdcm ? ' python3-gdcm' : ''}`);
  }
}

export function corpusFiles(): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const name of readdirSync(dir).sort()) {
      const p = join(dir, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(p);
    }
  };
  walk(CORPUS);
  return out;
}

export function runPydicom<T>(args: string[]): T {
  const out = execFileSync(PYTHON, ['-W', 'ignore', SCRIPT, ...args], {
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
  });
  return JSON.parse(out) as T;
}

export type PydicomMeta = {
  file: string;
  error?: string;
  forced?: boolean;
  transferSyntaxUid?: string | null;
  sopInstanceUid?: string | null;
  sopClassUid?: string | null;
  studyInstanceUid?: string | null;
  seriesInstanceUid?: string | null;
  modality?: string | null;
  patientId?: string | null;
  patientName?: string | null;
  rows?: number | null;
  columns?: number | null;
  numberOfFrames?: number | null;
  hasPixelData?: boolean;
};
