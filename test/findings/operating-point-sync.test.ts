/**
 * An analysis's operating point travels with it between replicas, so a finding synced from a
 * workstation says the same threshold and point on the hub; one from a peer before the field
 * (no operating_point in its payload) has none, as it had none.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { applyChange, analysisChange, type RemoteChange } from '#server/sync/entities.ts';
import { openDatabase } from '#server/store/sqlite.ts';
import type { Database } from '#server/store/database.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function takeBack(db: Database, key: string, payload: unknown): Promise<void> {
  await db.run('UPDATE scans SET latest_analysis_ref = NULL');
  await db.run('DELETE FROM findings');
  await db.run('DELETE FROM analyses');
  const change: RemoteChange = { change_id: '0190f0e0-0000-7000-8000-000000000002', device_id: 'dev_other', entity: 'analysis', key, hlc: '0000000000001-0000', user_id: null, payload };
  expect(await applyChange(db, change, new Map(), new Map<string, number>(), '2026-03-01T09:00:00.000Z')).toEqual({ status: 'accepted' });
}

it('sends the operating point with the thresholds and stores it on the other side (absent: none)', async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-operating-point-sync-'));
  const db = openDatabase(dir);
  try {
    const scan = await seedScan(db);
    await seedAnalysis(db, scan, [{ label: 'tumor_detected', confidence: 0.8 }]);
    await db.run(`UPDATE analyses SET operating_point = 'high_sensitivity', thresholds = '{"tumor_detected":0.21}'`);
    const row = (await db.get('SELECT id, public_id FROM analyses')) as { id: number; public_id: string };
    const sent = (await analysisChange(db, row.id, null))!.payload as Record<string, unknown>;
    expect(sent).toMatchObject({ operating_point: 'high_sensitivity', thresholds: { tumor_detected: 0.21 } });

    await takeBack(db, row.public_id, sent);
    expect(await db.get('SELECT operating_point, thresholds FROM analyses')).toEqual({ operating_point: 'high_sensitivity', thresholds: '{"tumor_detected":0.21}' });

    const { operating_point: _gone, ...fromOldPeer } = sent;
    await takeBack(db, row.public_id, fromOldPeer);
    expect(await db.get('SELECT operating_point FROM analyses')).toEqual({ operating_point: null });
  } finally {
    await db.close();
  }
});
