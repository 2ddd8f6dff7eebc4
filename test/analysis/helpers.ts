/**
 * Shared helpers for the analysis tests: the bundled model's folder, running the Debian
 * /usr/bin/python3 (the interpreter with python3-numpy, -pydicom and -torch; a bare `python3`
 * on PATH may be another one), reading phantoms.py's float32 sidecars, and what a manifest
 * is refused for.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { ManifestError, parseManifest } from '#server/analysis/manifest.ts';

const run = promisify(execFile);

export const REPO_ROOT = resolve(import.meta.dirname, '..', '..');
export const MODEL_DIR = join(REPO_ROOT, 'models', 'mia-phantom-detector');
export const PYTHON = '/usr/bin/python3';
/** phantoms.py's held-out test range (SEED_TEST_BASE); never used for training. */
export const SEED_TEST_BASE = 20_000_000;

export async function python(args: readonly string[], timeoutMs = 120_000): Promise<{ stdout: string; stderr: string }> {
  try {
    return await run(PYTHON, [...args], { cwd: REPO_ROOT, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string; stdout?: string };
    if (e.code === 'ENOENT') throw new Error(`${PYTHON} not found: install Debian python3 (apt-get install python3)`);
    throw new Error(`${PYTHON} ${args.join(' ')} failed: ${e.message}\n${e.stderr ?? ''}`);
  }
}

export async function withTempDir<T>(fn: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(tmpdir(), 'mia-analysis-'));
  try {
    return await fn(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

export async function readFloat32(path: string): Promise<Float32Array> {
  const buf = await readFile(path);
  // Copy into a fresh, aligned buffer: a Buffer's byteOffset need not be a multiple of 4.
  const copy = new ArrayBuffer(buf.byteLength);
  new Uint8Array(copy).set(buf);
  return new Float32Array(copy);
}

export type TruthBox = { x: number; y: number; width: number; height: number };
export type SidecarLesion = {
  label: string;
  instance_uid: string;
  frame: number;
  slice_index: number;
  box: TruthBox;
  slices: { slice_index: number; instance_uid: string; box: TruthBox }[];
};
export type Sidecar = {
  seed: number;
  modality: 'CT' | 'MR';
  scan_uid: string;
  rows: number;
  columns: number;
  slices: number;
  instance_uids: string[];
  lesions: SidecarLesion[];
  raw_file: string;
  shape: [number, number, number];
};

export type PhantomSeries = Sidecar & { values: Float32Array };

/** Generates phantoms with phantoms.py --raw (no DICOM) and reads them back. */
export async function generatePhantoms(
  dir: string,
  opts: { seed: number; series: number; modality: 'CT' | 'MR' | 'both'; kinds: string; size?: number },
): Promise<PhantomSeries[]> {
  const raw = join(dir, `raw-${opts.seed}`);
  await python([
    join(MODEL_DIR, 'phantoms.py'),
    '--out', join(dir, 'dicom'),
    '--no-dicom',
    '--raw', raw,
    '--seed', String(opts.seed),
    '--series', String(opts.series),
    '--modality', opts.modality,
    '--kinds', opts.kinds,
    '--size', String(opts.size ?? 256),
  ]);
  const out: PhantomSeries[] = [];
  for (let i = 0; i < opts.series; i++) {
    const side = JSON.parse(await readFile(join(raw, `series-${opts.seed + i}.json`), 'utf8')) as Sidecar;
    out.push({ ...side, values: await readFloat32(join(raw, side.raw_file)) });
  }
  return out;
}

export function sliceOf(series: PhantomSeries, k: number): Float32Array {
  const plane = series.rows * series.columns;
  return series.values.subarray(k * plane, (k + 1) * plane);
}

/** What parseManifest finds wrong with `json`, as "path: message" lines; none for a valid manifest. */
export function manifestIssues(json: unknown): string[] {
  try {
    parseManifest(json);
  } catch (err) {
    if (err instanceof ManifestError) return err.issues.map((i) => `${i.path}: ${i.message}`);
    throw err;
  }
  return [];
}
