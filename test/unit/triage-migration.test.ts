/**
 * Migration 13 on a database written before triage: analyses of the bundled model get its
 * labels' urgencies (so an old haemorrhage still tops the worklist); another model's stay
 * routine rather than borrowing urgencies from a manifest it never ran with.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openDatabase } from '#server/store/database.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('backfills the bundled model\'s label urgencies into analyses made before migration 13', () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-migration-13-'));
  const db = openDatabase(dir);
  const bundled = seedScan(db);
  seedAnalysis(db, bundled, [{ label: 'hemorrhage_detected' }]);
  const other = seedScan(db);
  seedAnalysis(db, other, [{ label: 'hemorrhage_detected' }]);
  db.prepare(`UPDATE analyses SET model_id = 'someone-elses-model' WHERE scan_ref = ?`).run(other.scanRef);
  // Back to the schema of version 12.
  db.exec('ALTER TABLE analyses DROP COLUMN triage_labels');
  db.pragma('user_version = 12');
  db.close();

  const upgraded = openDatabase(dir);
  try {
    const labels = (scanRef: number) =>
      JSON.parse((upgraded.prepare('SELECT triage_labels FROM analyses WHERE scan_ref = ?').get(scanRef) as { triage_labels: string }).triage_labels) as unknown;
    expect(labels(bundled.scanRef)).toEqual({
      tumor_detected: { urgency: 'soon', display_name: 'Mass / tumour' },
      hemorrhage_detected: { urgency: 'urgent', display_name: 'Intracranial haemorrhage' },
      infarct_detected: { urgency: 'urgent', display_name: 'Infarct' },
    });
    expect(labels(other.scanRef)).toEqual({});
  } finally {
    upgraded.close();
  }
});
