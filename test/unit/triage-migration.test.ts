/**
 * Migration 13 on a database written before triage: analyses of the bundled model get its
 * labels' urgencies (so an old haemorrhage still tops the worklist); another model's stay
 * routine rather than borrowing urgencies from a manifest it never ran with.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { openDatabase } from '#server/store/sqlite.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

it('backfills the bundled model\'s label urgencies into analyses made before migration 13', async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-migration-13-'));
  const db = openDatabase(dir);
  const bundled = await seedScan(db);
  await seedAnalysis(db, bundled, [{ label: 'hemorrhage_detected' }]);
  const other = await seedScan(db);
  await seedAnalysis(db, other, [{ label: 'hemorrhage_detected' }]);
  (await db.run(`UPDATE analyses SET model_id = 'someone-elses-model' WHERE scan_ref = ?`, [other.scanRef]));
  // Back to the schema of version 12.
  db.connection.exec('ALTER TABLE analyses DROP COLUMN triage_labels');
  // And of what later versions added (migrations 14 and later).
  db.connection.exec('DROP TABLE nodes; DROP TABLE rate_limits; ALTER TABLE analyses DROP COLUMN owner_node; ALTER TABLE import_jobs DROP COLUMN owner_node');
  db.connection.exec('ALTER TABLE users DROP COLUMN origin; ALTER TABLE users DROP COLUMN disabled_at; ALTER TABLE api_keys DROP COLUMN origin');
  db.connection.exec('DROP TABLE sync_quarantine; DROP TABLE review_supersedes; DROP TABLE review_events; ALTER TABLE findings DROP COLUMN review_disputed');
  db.connection.exec('DROP TABLE sync_inbox; DROP TABLE report_conflicts; ALTER TABLE reports DROP COLUMN impression_hlc; ALTER TABLE reports DROP COLUMN recommendation_hlc; ALTER TABLE reports DROP COLUMN final_hlc; ALTER TABLE reports DROP COLUMN final_change_id');
  db.connection.exec('ALTER TABLE analyses DROP COLUMN operating_point');
  db.connection.exec('DROP INDEX scans_modality_status; DROP INDEX findings_analysis_label; CREATE INDEX findings_analysis ON findings (analysis_ref)');
  db.connection.exec('DROP TABLE retrieves');
  db.connection.exec('DROP TABLE send_jobs; DROP TABLE routing_rules');
  db.connection.exec('DROP INDEX studies_date; DROP INDEX studies_accession');
  db.connection.exec('DROP TABLE dicom_peers');
  db.connection.exec('ALTER TABLE findings DROP COLUMN localization');
  db.connection.exec('ALTER TABLE scans DROP COLUMN archived_hlc');
  db.connection.exec('ALTER TABLE findings DROP COLUMN mask');
  db.connection.exec('DROP INDEX instances_slice_order; CREATE INDEX instances_scan_order ON instances (scan_ref, position, instance_number)');
  db.connection.exec('DROP TABLE study_assignments; DROP TABLE report_writes; DROP TABLE audit_gaps; DROP INDEX audit_events_device_seq; ALTER TABLE audit_events DROP COLUMN device_id; ALTER TABLE audit_events DROP COLUMN device_seq');
  db.connection.exec('DROP TABLE sync_receipts; DROP TABLE devices; DROP TABLE sync_changes');
  db.connection.exec('DROP INDEX patients_name_fold; ALTER TABLE patients DROP COLUMN name_fold; ALTER TABLE patients DROP COLUMN patient_id_fold; ALTER TABLE studies DROP COLUMN text_fold');
  db.connection.pragma('user_version = 12');
  await db.close();

  const upgraded = openDatabase(dir);
  try {
    const labels = async (scanRef: number) =>
      JSON.parse(((await upgraded.get('SELECT triage_labels FROM analyses WHERE scan_ref = ?', [scanRef])) as { triage_labels: string }).triage_labels) as unknown;
    expect(await labels(bundled.scanRef)).toEqual({
      tumor_detected: { urgency: 'soon', display_name: 'Mass / tumour' },
      hemorrhage_detected: { urgency: 'urgent', display_name: 'Intracranial haemorrhage' },
      infarct_detected: { urgency: 'urgent', display_name: 'Infarct' },
    });
    expect(await labels(other.scanRef)).toEqual({});
  } finally {
    await upgraded.close();
  }
});
