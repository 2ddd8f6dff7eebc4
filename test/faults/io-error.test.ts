/**
 * A disk that fails under a running server: the data folder is an ext4 file system on a loop
 * device, shut down with FS_IOC_SHUTDOWN, after which every read and write on it (the database,
 * its write-ahead log, the archive, the log) fails with EIO, as a dying disk's would. A
 * device-mapper error target would fail only chosen sectors, but needs the kernel's dm driver,
 * which containers usually lack; the shutdown needs only ext4 and a loop device.
 *
 * What must hold: requests answer 503 naming the I/O error (or succeed from what is cached),
 * never a bare 500; the process stays up and stops when told; once the disk is back (unmounted
 * and mounted again, which replays its journal) the database is sound, nothing acknowledged is
 * lost, and a new server serves it.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makePhantoms } from '../imports/helpers.ts';
import { loopExt4, type LoopDisk } from './loop-disk.ts';
import { call, createKey, dicomFiles, startServe, type ApiReply, type ServeProcess } from './serve-process.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-io-error-'));
const image = join(work, 'disk.img');
const dataDir = join(work, 'data');
const uploads = join(work, 'uploads');

let disk: LoopDisk | undefined;
let server: ServeProcess | undefined;
let key = '';
const acknowledged = new Set<string>();

/** A read may still be answered from what SQLite has cached; if not, the failure is named. */
function expectNamedOrFine(reply: ApiReply): void {
  if (reply.status !== 200) expectIoError(reply);
}

function expectIoError(reply: ApiReply): void {
  expect(reply.status, reply.text).toBe(503);
  expect(reply.json.error).toMatchObject({ code: 503, title: 'Service Unavailable', message: 'The disk holding the data folder reported an I/O error' });
  expect(reply.json.error.details).toMatch(/^(EIO|ENOENT|SQLITE_IOERR\w*):/);
}

beforeAll(async () => {
  mkdirSync(dataDir);
  disk = loopExt4(image, dataDir);
  if (disk.unavailable) return;
  makePhantoms(uploads, { series: 1, seed: 410, size: 64, slices: 10, modality: 'CT' });
  key = createKey(dataDir, 'admin@hospital.test');
  server = await startServe(dataDir);
});

afterAll(async () => {
  await server?.stop();
  disk?.unmount();
  rmSync(work, { recursive: true, force: true });
});

describe('an I/O error on the data disk (ext4 shut down under the server)', () => {
  it('stores uploads while the disk works', async ({ skip }) => {
    skip(disk?.unavailable !== null, `needs a loop-mounted ext4 as the data folder: ${disk?.unavailable ?? ''}`);
    for (const file of dicomFiles(uploads)) {
      const reply = await call(server?.url ?? '', key, 'POST', '/v1/instances', { dicom: readFileSync(file) });
      expect(reply.status, reply.text).toBe(200);
      for (const outcome of reply.json.data.outcomes as Array<{ sop_instance_uid: string }>) acknowledged.add(outcome.sop_instance_uid);
    }
    expect(acknowledged.size).toBe(10);
  });

  it('answers 503 naming the I/O error, never a bare 500, and stays up', async ({ skip }) => {
    skip(disk?.unavailable !== null, `needs a loop-mounted ext4 as the data folder: ${disk?.unavailable ?? ''}`);
    const s = server as ServeProcess;
    expect(disk?.shutDown('io-error')).toBeNull();

    const upload = await call(s.url, key, 'POST', '/v1/instances', { dicom: readFileSync(dicomFiles(uploads)[0] ?? '') });
    // Already stored: a duplicate needs no disk write, but it needs the database, which fails.
    expectNamedOrFine(upload);
    const exported = await call(s.url, key, 'POST', '/v1/exports', { json: { format: 'csv' } });
    expectIoError(exported);
    // Reads and the log's writes fail too (each request logs a line); none may end the process.
    for (let i = 0; i < 40; i += 1) {
      expectNamedOrFine(await call(s.url, key, 'GET', '/v1/auth/me'));
      expectNamedOrFine(await call(s.url, key, 'GET', '/v1/scans'));
    }
    expect(s.alive(), s.output()).toBe(true);
    // A stop on a failed disk ends the process; it may say the disk failed, it may not crash.
    const code = await s.stop();
    expect([0, 1], s.output()).toContain(code);
    expect(s.output()).not.toMatch(/\n\s+at /);
  });

  it('once the disk is back, the database is sound and holds every acknowledged instance', async ({ skip }) => {
    skip(disk?.unavailable !== null, `needs a loop-mounted ext4 as the data folder: ${disk?.unavailable ?? ''}`);
    await server?.stop();
    expect(disk?.remount()).toBeNull();
    const db = new BetterSqlite3(join(dataDir, 'mia.sqlite'));
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      const rows = db.prepare('SELECT sop_instance_uid, file_path, file_sha256 FROM instances').all() as Array<{
        sop_instance_uid: string;
        file_path: string;
        file_sha256: string;
      }>;
      const stored = new Map(rows.map((r) => [r.sop_instance_uid, r]));
      for (const uid of acknowledged) {
        const row = stored.get(uid);
        expect(row, uid).toBeDefined();
        expect(createHash('sha256').update(readFileSync(join(dataDir, row?.file_path ?? ''))).digest('hex')).toBe(row?.file_sha256);
      }
    } finally {
      db.close();
    }
    server = await startServe(dataDir);
    const scans = await call(server.url, key, 'GET', '/v1/scans');
    expect(scans.status, scans.text).toBe(200);
    expect(scans.json.data.items).toHaveLength(1);
  });
});
