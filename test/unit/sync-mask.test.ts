/**
 * A segmentation finding's mask travels with its analysis between replicas (docs/models.md,
 * Masks): the change one workstation records carries it, another takes it in and serves it the
 * same; a mask whose runs do not fill its box is refused with the field named.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import type { RleMask } from '#common/rle-mask.ts';
import { findAnalysesWithFindings } from '#server/store/analyses.ts';
import type { Database } from '#server/store/database.ts';
import { openDatabase } from '#server/store/sqlite.ts';
import { analysisChange, applyChange, type RemoteChange } from '#server/sync/entities.ts';
import { toFinding } from '#server/scans/scan-views.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

const dirs: string[] = [];
const dbs: Database[] = [];
afterEach(async () => {
  for (const db of dbs.splice(0)) await db.close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function replica(): Database {
  const dir = mkdtempSync(join(tmpdir(), 'mia-sync-mask-'));
  dirs.push(dir);
  const db = openDatabase(dir);
  dbs.push(db);
  return db;
}

const mask: RleMask = { encoding: 'rle', x: 10, y: 20, width: 3, height: 2, counts: [1, 4, 1] };

async function setUp(): Promise<{ change: RemoteChange; other: Database }> {
  const here = replica();
  const scan = await seedScan(here);
  await seedAnalysis(here, scan, [
    { label: 'tumor_detected', confidence: 0.8, x: 10, y: 20, width: 3, height: 2, mask },
    { label: 'tumor_detected', confidence: 0.6, x: 50, y: 50, width: 5, height: 5 },
  ]);
  const ref = ((await here.get('SELECT latest_analysis_ref AS ref FROM scans WHERE id = ?', [scan.scanRef])) as { ref: number }).ref;
  const local = (await analysisChange(here, ref, null))!;
  const other = replica();
  const theirs = await seedScan(other);
  await other.run('UPDATE scans SET scan_id = ? WHERE id = ?', [scan.scanId, theirs.scanRef]);
  // As it crosses the wire: JSON.
  const change: RemoteChange = { change_id: 'c1', device_id: 'd1', entity: 'analysis', key: local.key, hlc: '0', user_id: null, payload: JSON.parse(JSON.stringify(local.payload)) };
  return { change, other };
}

it('carries the mask to another replica, which serves it as the one that made it does', async () => {
  const { change, other } = await setUp();
  const outcome = await applyChange(other, change, new Map(), new Map(), '2026-03-01T09:00:00.000Z');
  expect(outcome).toEqual({ status: 'accepted' });
  const ref = ((await other.get('SELECT id FROM analyses WHERE public_id = ?', [change.key])) as { id: number }).id;
  const rows = (await findAnalysesWithFindings(other, [ref])).findings.get(ref) ?? [];
  expect(rows.map((r) => toFinding(r).mask)).toEqual([mask, undefined]);
});

it('refuses an analysis whose mask runs do not fill its box, naming the field', async () => {
  const { change, other } = await setUp();
  const payload = change.payload as { findings: { mask?: RleMask }[] };
  payload.findings[0]!.mask = { ...mask, counts: [1, 4, 9] };
  const outcome = await applyChange(other, change, new Map(), new Map(), '2026-03-01T09:00:00.000Z');
  expect(outcome).toMatchObject({ status: 'rejected', retry: false, reason: expect.stringMatching(/findings\.0\.mask.*counts must add up to width \* height/) });
  expect(await other.get('SELECT 1 FROM analyses WHERE public_id = ?', [change.key])).toBeUndefined();
});
