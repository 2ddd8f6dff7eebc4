/**
 * A finding's localization travels with its analysis between replicas: an image-level finding
 * stays one on the other side, and an analysis from a peer that predates the field (no
 * localization in its payload) is boxes, as everything it made was.
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

type Payload = { findings: Record<string, unknown>[] };

async function takeBack(db: Database, key: string, payload: unknown): Promise<void> {
  // Gone here, so the change is new to this replica again.
  await db.run('UPDATE scans SET latest_analysis_ref = NULL');
  await db.run('DELETE FROM findings');
  await db.run('DELETE FROM analyses');
  const change: RemoteChange = { change_id: '0190f0e0-0000-7000-8000-000000000001', device_id: 'dev_other', entity: 'analysis', key, hlc: '0000000000001-0000', user_id: null, payload };
  expect(await applyChange(db, change, new Map(), new Map<string, number>(), '2026-03-01T09:00:00.000Z')).toEqual({ status: 'accepted' });
}

it('sends localization only when not a box, and takes it in (absent: box)', async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-localization-sync-'));
  const db = openDatabase(dir);
  try {
    const scan = await seedScan(db);
    await seedAnalysis(db, scan, [
      { label: 'lesion_present', confidence: 0.9, x: 0, y: 0, width: 128, height: 128, localization: 'image' },
      { label: 'tumor_detected', confidence: 0.8 },
    ]);
    const row = (await db.get('SELECT id, public_id FROM analyses')) as { id: number; public_id: string };
    const change = (await analysisChange(db, row.id, null))!;
    const sent = change.payload as Payload;
    const byLabel = new Map(sent.findings.map((f) => [f['label'], f]));
    expect(byLabel.get('lesion_present')!['localization']).toBe('image');
    // A box's payload is what peers before the field send and expect.
    expect(byLabel.get('tumor_detected')).not.toHaveProperty('localization');

    await takeBack(db, row.public_id, sent);
    const stored = async () => (await db.all('SELECT label, localization FROM findings ORDER BY label')) as { label: string; localization: string }[];
    expect(await stored()).toEqual([
      { label: 'lesion_present', localization: 'image' },
      { label: 'tumor_detected', localization: 'box' },
    ]);

    const fromOldPeer = { ...sent, findings: sent.findings.map(({ localization: _gone, ...f }) => f) };
    await takeBack(db, row.public_id, fromOldPeer);
    expect((await stored()).map((f) => f.localization)).toEqual(['box', 'box']);

    const bad = { ...sent, findings: sent.findings.map((f) => ({ ...f, localization: 'somewhere' })) };
    await db.run('DELETE FROM findings');
    await db.run('UPDATE scans SET latest_analysis_ref = NULL');
    await db.run('DELETE FROM analyses');
    const refused = await applyChange(db, { change_id: '0190f0e0-0000-7000-8000-000000000002', device_id: 'dev_other', entity: 'analysis', key: row.public_id, hlc: '0000000000002-0000', user_id: null, payload: bad }, new Map(), new Map<string, number>(), '2026-03-01T09:00:00.000Z');
    expect(refused).toMatchObject({ status: 'rejected', reason: expect.stringMatching(/^analysis payload: findings\.0\.localization /) });
  } finally {
    await db.close();
  }
});
