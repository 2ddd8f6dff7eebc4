/**
 * The SQLite store's read version: what decides whether an answer kept between requests
 * (server/http/shared-answers.ts) is still the store's answer.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { insertAuditEvent } from '#server/store/audit.ts';
import { openDatabase, type SqliteDatabase } from '#server/store/sqlite.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

let dir: string;
let db: SqliteDatabase;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mia-read-version-'));
  db = openDatabase(dir);
});
afterEach(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

const auditEvent = {
  at: '2026-03-01T08:00:00.000Z',
  request_id: 'req-1',
  key_id: null,
  user_id: null,
  action: 'results.list',
  target: null,
  patient_id: null,
  outcome: 'success' as const,
  status_code: 200,
};

describe('readVersion (SQLite)', () => {
  it('stays the same over reads and the request log, and moves with a content write', async () => {
    const before = db.readVersion();
    await db.all('SELECT * FROM scans');
    await insertAuditEvent(db, auditEvent);
    expect(db.readVersion()).toBe(before);
    await seedScan(db);
    expect(db.readVersion()).not.toBe(before);
  });

  it('moves with a write outside a transaction (one statement committing on its own)', async () => {
    const scan = await seedScan(db);
    const before = db.readVersion();
    await db.run("UPDATE scans SET modality = 'CT' WHERE id = ?", [scan.scanRef]);
    expect(db.readVersion()).not.toBe(before);
  });

  it('stays the same over writes that change no row (an idle worker claiming nothing), and moves with one that does', async () => {
    const scan = await seedScan(db);
    const before = db.readVersion();
    await db.run("UPDATE scans SET modality = 'CT' WHERE id = ?", [scan.scanRef + 1000]);
    expect(await db.all("UPDATE scans SET modality = 'CT' WHERE id = ? RETURNING id", [scan.scanRef + 1000])).toEqual([]);
    expect(await db.get("DELETE FROM scans WHERE id = ? RETURNING id", [scan.scanRef + 1000])).toBeUndefined();
    expect(db.readVersion()).toBe(before);
    expect(await db.get("UPDATE scans SET modality = 'CT' WHERE id = ? RETURNING id", [scan.scanRef])).toEqual({ id: scan.scanRef });
    const afterOne = db.readVersion();
    expect(afterOne).not.toBe(before);
    expect(await db.run("UPDATE scans SET modality = 'MR' WHERE id = ?", [scan.scanRef])).toBe(1);
    expect(db.readVersion()).not.toBe(afterOne);
  });

  it('moves when a transaction that wrote is rolled back, and is null inside one', async () => {
    const scan = await seedScan(db);
    const before = db.readVersion();
    let inside: string | null = 'unset';
    await expect(
      db.transaction(async (tx) => {
        inside = tx.readVersion();
        await tx.run("UPDATE scans SET modality = 'CT' WHERE id = ?", [scan.scanRef]);
        throw new Error('changed its mind');
      }),
    ).rejects.toThrow('changed its mind');
    expect(inside).toBeNull();
    const after = db.readVersion();
    expect(after).not.toBe(before);
    expect((await db.get<{ modality: string }>('SELECT modality FROM scans WHERE id = ?', [scan.scanRef]))?.modality).toBe('MR');
    // Settled: nothing written since.
    expect(db.readVersion()).toBe(after);
  });

  it('moves when another connection (another process, a worker) commits', async () => {
    const other = openDatabase(dir);
    try {
      const before = db.readVersion();
      await seedAnalysis(other, await seedScan(other), [{ confidence: 0.8 }]);
      expect(db.readVersion()).not.toBe(before);
      const settled = db.readVersion();
      expect(db.readVersion()).toBe(settled);
    } finally {
      await other.close();
    }
  });
});
