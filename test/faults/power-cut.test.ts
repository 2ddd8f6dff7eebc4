/**
 * A power cut under a running server: the data folder is ext4 on a loop device, shut down with
 * FS_IOC_SHUTDOWN and FS_GOING_FLAGS_NOLOGFLUSH, which drops every write the kernel had not yet
 * made durable, as losing power would. Uploads and a reader's verdict answered before the cut
 * must all be there after the file system is mounted again (their commits sync the write-ahead
 * log: store/database.ts inDurableTransaction), and the database must be sound.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makePhantoms } from '../imports/helpers.ts';
import { loopExt4, type LoopDisk } from './loop-disk.ts';
import { call, createKey, dicomFiles, startServe, type ServeProcess } from './serve-process.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-power-cut-'));
const image = join(work, 'disk.img');
const dataDir = join(work, 'data');
const uploads = join(work, 'uploads');

let disk: LoopDisk | undefined;
let server: ServeProcess | undefined;

beforeAll(() => {
  mkdirSync(dataDir);
  disk = loopExt4(image, dataDir);
  if (disk.unavailable) return;
  makePhantoms(uploads, { series: 1, seed: 420, size: 64, slices: 10, modality: 'CT' });
});

afterAll(async () => {
  await server?.stop();
  disk?.unmount();
  rmSync(work, { recursive: true, force: true });
});

describe('a power cut under the server', () => {
  it('keeps every upload answered 200 and the database sound', async ({ skip }) => {
    skip(disk?.unavailable !== null, `needs a loop-mounted ext4 as the data folder: ${disk?.unavailable ?? ''}`);
    const key = createKey(dataDir, 'admin@hospital.test');
    // The key's own commit (a CLI process that has exited) is made durable by a checkpoint:
    // the cut below is about what the running server acknowledges.
    const db = new BetterSqlite3(join(dataDir, 'mia.sqlite'));
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.close();
    server = await startServe(dataDir);
    const acknowledged: string[] = [];
    for (const file of dicomFiles(uploads)) {
      const reply = await call(server.url, key, 'POST', '/v1/instances', { dicom: readFileSync(file) });
      expect(reply.status, reply.text).toBe(200);
      for (const o of reply.json.data.outcomes as Array<{ sop_instance_uid: string }>) acknowledged.push(o.sop_instance_uid);
    }
    expect(acknowledged).toHaveLength(10);

    expect(disk?.shutDown('power-cut')).toBeNull();
    await server.stop();
    server = undefined;
    expect(disk?.remount()).toBeNull();

    const after = new BetterSqlite3(join(dataDir, 'mia.sqlite'));
    try {
      expect(after.pragma('integrity_check', { simple: true })).toBe('ok');
      const stored = new Set((after.prepare('SELECT sop_instance_uid FROM instances').all() as Array<{ sop_instance_uid: string }>).map((r) => r.sop_instance_uid));
      expect(acknowledged.filter((uid) => !stored.has(uid))).toEqual([]);
    } finally {
      after.close();
    }
  });
});
