/**
 * The operational log on real files: rotation by size loses no line, and a disk that refuses
 * writes (/dev/full answers every write with ENOSPC) or a log folder that cannot be made costs
 * lines, counted and noted, never the process.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createFileLogger, LOG_FILE } from '#server/log.ts';
import { PRIVATE_FILE_MODE } from '#server/private-files.ts';

const root = mkdtempSync(join(tmpdir(), 'mia-log-'));
let folders = 0;
const dataFolder = (): string => join(root, String((folders += 1)));

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

function linesOf(file: string): Array<Record<string, unknown>> {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** The log's files from oldest to newest, as far as they exist. */
function generations(dataDir: string, keep: number): string[] {
  const log = join(dataDir, 'logs', LOG_FILE);
  return [...Array.from({ length: keep }, (_, i) => `${log}.${keep - i}`), log].filter((file) => existsSync(file));
}

/** Ten runs (a restart each) of 20 lines of about 100 bytes: 20 KB through a 4 KiB rotation. */
async function logRuns(dataDir: string, keep: number): Promise<void> {
  for (let run = 0; run < 10; run += 1) {
    const log = createFileLogger(dataDir, false, { rotation: { maxBytes: 4096, keep } });
    for (let i = 0; i < 20; i += 1) log.info('request', { seq: run * 20 + i, route: 'GET /v1/scans', status: 200 });
    await log.close();
  }
}

describe('operational log', () => {
  it('rotates by size without losing or reordering a line, each file private', async () => {
    const dataDir = dataFolder();
    await logRuns(dataDir, 50);
    const files = generations(dataDir, 50);
    expect(files.length).toBeGreaterThanOrEqual(4);
    const seqs = files.flatMap((file) => linesOf(file).map((line) => line['seq']));
    expect(seqs).toEqual(Array.from({ length: 200 }, (_, i) => i));
    for (const file of files) {
      expect(statSync(file).mode & 0o777).toBe(PRIVATE_FILE_MODE);
      // A file is rotated after the batch that reached the size: it exceeds it by one batch at most.
      expect(statSync(file).size).toBeLessThan(4096 + 20 * 120);
    }
  });

  it('keeps the newest `keep` rotated files and deletes older ones', async () => {
    const dataDir = dataFolder();
    await logRuns(dataDir, 2);
    const log = join(dataDir, 'logs', LOG_FILE);
    expect(existsSync(`${log}.2`)).toBe(true);
    expect(existsSync(`${log}.3`)).toBe(false);
    const seqs = generations(dataDir, 2).flatMap((file) => linesOf(file).map((line) => line['seq'] as number));
    expect(seqs.at(-1)).toBe(199);
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => 200 - seqs.length + i));
  });

  it('drops and counts lines while the disk is full, and notes the gap when writing resumes', async () => {
    const dataDir = dataFolder();
    mkdirSync(join(dataDir, 'logs'), { recursive: true });
    const file = join(dataDir, 'logs', LOG_FILE);
    symlinkSync('/dev/full', file);
    const log = createFileLogger(dataDir, false, { retryMs: 0 });
    for (let i = 0; i < 5; i += 1) log.error('storage.failed', { seq: i });
    await log.flush();
    log.info('request', { seq: 5 });
    await log.flush();
    // Space again: the same logger carries on in a file of its own.
    unlinkSync(file);
    log.info('request', { seq: 6 });
    await log.close();
    const lines = linesOf(file);
    expect(lines[0]).toMatchObject({ level: 'error', event: 'log.gap', dropped: 6, error: 'ENOSPC' });
    expect(Date.parse(lines[0]?.['since'] as string)).not.toBeNaN();
    expect(lines.slice(1).map((line) => line['seq'])).toEqual([6]);
  });

  it('notes a gap at close when nothing was logged after it', async () => {
    const dataDir = dataFolder();
    mkdirSync(join(dataDir, 'logs'), { recursive: true });
    const file = join(dataDir, 'logs', LOG_FILE);
    symlinkSync('/dev/full', file);
    const log = createFileLogger(dataDir, false);
    for (let i = 0; i < 3; i += 1) log.info('request', { seq: i });
    await log.flush();
    unlinkSync(file);
    await log.close();
    expect(linesOf(file)).toEqual([expect.objectContaining({ event: 'log.gap', dropped: 3, error: 'ENOSPC' })]);
  });

  it('does not need its folder to start: lines wait for a later retry, counted', async () => {
    const dataDir = dataFolder();
    mkdirSync(dataDir);
    // A file where the logs folder should be: every open fails, as on a disk with no room left.
    writeFileSync(join(dataDir, 'logs'), 'not a folder');
    const log = createFileLogger(dataDir, false, { retryMs: 0 });
    log.info('server.started');
    await log.flush();
    rmSync(join(dataDir, 'logs'));
    log.info('request', { seq: 1 });
    await log.close();
    const lines = linesOf(join(dataDir, 'logs', LOG_FILE));
    expect(lines[0]).toMatchObject({ event: 'log.gap', dropped: 1 });
    expect(lines[1]).toMatchObject({ event: 'request', seq: 1 });
  });

  it('ends a line an earlier process left cut (its disk was full) before writing the next', async () => {
    const dataDir = dataFolder();
    mkdirSync(join(dataDir, 'logs'), { recursive: true });
    const file = join(dataDir, 'logs', LOG_FILE);
    writeFileSync(file, '{"at":"2026-01-01T00:00:00.000Z","level":"info","event":"requ');
    const log = createFileLogger(dataDir, false);
    log.info('request', { seq: 1 });
    await log.close();
    const text = readFileSync(file, 'utf8').split('\n');
    expect(text).toHaveLength(3);
    expect(JSON.parse(text[1] ?? '')).toMatchObject({ event: 'request', seq: 1 });
  });
});
