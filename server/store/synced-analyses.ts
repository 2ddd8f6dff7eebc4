/**
 * SQL for analyses as sync carries them (docs/sync.md): a finished analysis is immutable, so it
 * travels whole - the row with its model findings - under the public ids it was made with.
 */
import type { AnalysisRow, FindingRow } from '#server/store/analyses.ts';
import type { Database } from '#server/store/database.ts';

/** A finished analysis as it travels: its row (without local refs) and its scan's series UID. */
export type AnalysisSnapshotRow = Pick<
  AnalysisRow,
  'public_id' | 'model_id' | 'model_name' | 'model_version' | 'model_sha256' | 'thresholds' | 'operating_point' | 'triage_labels' | 'recommendation' | 'created_at' | 'started_at' | 'finished_at'
> & { scan_id: string };

export type SnapshotFindingRow = Pick<FindingRow, 'public_id' | 'label' | 'confidence' | 'x' | 'y' | 'width' | 'height' | 'instance_uid' | 'frame' | 'localization' | 'mask'>;

export async function readAnalysisSnapshot(db: Database, analysisRef: number): Promise<{ analysis: AnalysisSnapshotRow; findings: SnapshotFindingRow[] } | undefined> {
  const analysis = (await db.get(`SELECT a.public_id, s.scan_id, a.model_id, a.model_name, a.model_version, a.model_sha256, a.thresholds,
       a.operating_point, a.triage_labels, a.recommendation, a.created_at, a.started_at, a.finished_at
     FROM analyses a JOIN scans s ON s.id = a.scan_ref WHERE a.id = ? AND a.status = 'succeeded'`, [analysisRef])) as AnalysisSnapshotRow | undefined;
  if (!analysis) return undefined;
  const findings = (await db.all(`SELECT public_id, label, confidence, x, y, width, height, instance_uid, frame, localization, mask FROM findings
     WHERE analysis_ref = ? AND source = 'model' ORDER BY id`, [analysisRef])) as SnapshotFindingRow[];
  return { analysis, findings };
}

export async function analysisExists(db: Database, publicId: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS one FROM analyses WHERE public_id = ?', [publicId])) !== undefined;
}

/** Inserts a finished analysis from another replica with its findings; returns its row id. */
export async function insertSyncedAnalysis(db: Database, scanRef: number, a: Omit<AnalysisSnapshotRow, 'scan_id'>, findings: readonly SnapshotFindingRow[]): Promise<number> {
  const row = (await db.get(`INSERT INTO analyses (public_id, scan_ref, model_id, model_name, model_version, model_sha256, thresholds,
       operating_point, triage_labels, status, recommendation, created_at, started_at, finished_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'succeeded', ?, ?, ?, ?) RETURNING id`,
    [a.public_id, scanRef, a.model_id, a.model_name, a.model_version, a.model_sha256, a.thresholds, a.operating_point, a.triage_labels, a.recommendation, a.created_at, a.started_at, a.finished_at])) as { id: number };
  for (const f of findings) {
    await db.run(`INSERT INTO findings (public_id, analysis_ref, label, confidence, x, y, width, height, instance_uid, frame, localization, mask)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, [f.public_id, row.id, f.label, f.confidence, f.x, f.y, f.width, f.height, f.instance_uid, f.frame, f.localization, f.mask]);
  }
  return row.id;
}

/**
 * Makes an arrived analysis the scan's result when it finished after the current one (or the scan
 * has none): every replica then shows the same, newest result whatever order analyses arrived in.
 */
export async function adoptIfNewest(db: Database, scanRef: number, analysisRef: number): Promise<boolean> {
  const changed = await db.run(`UPDATE scans SET latest_analysis_ref = ? WHERE id = ? AND (latest_analysis_ref IS NULL OR
       (SELECT COALESCE(finished_at, '') || public_id FROM analyses WHERE id = scans.latest_analysis_ref) <
       (SELECT COALESCE(finished_at, '') || public_id FROM analyses WHERE id = ?))`, [analysisRef, scanRef, analysisRef]);
  return changed === 1;
}
