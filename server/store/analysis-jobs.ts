/**
 * SQL for analyses as jobs. An analysis row is its own job (migration 3): every state change is
 * conditional on the state the caller saw and, while running, on the owning process, so a
 * cancel, a second process or a restart can never make two writers finish the same job.
 */
import type { ScanStatus } from '#common/vocabulary.ts';
import { insertFindings, type AnalysisRow, type FindingInput, type TriageLabels } from '#server/store/analyses.ts';
import { sql, type Database } from '#server/store/database.ts';
import { newPublicId } from '#server/store/public-id.ts';

export type AnalysisJobRow = AnalysisRow & {
  scan_id: string;
  modality: string;
  body_part: string | null;
  scan_status: ScanStatus;
  latest_analysis_ref: number | null;
  patient_id: string;
};

export type ModelRecord = { id: string; name: string; version: string; sha256: string };

const JOB_SELECT = `
  SELECT a.*, s.scan_id, s.modality, s.body_part, s.status AS scan_status, s.latest_analysis_ref, p.patient_id
  FROM analyses a JOIN scans s ON s.id = a.scan_ref JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref`;

export function insertQueuedAnalysis(
  db: Database,
  input: { scanRef: number; model: ModelRecord; thresholds: Record<string, number>; triageLabels: TriageLabels; requestedBy: string | null; at: string },
): AnalysisJobRow {
  const info = sql(db,
    `INSERT INTO analyses (public_id, scan_ref, model_id, model_name, model_version, model_sha256, thresholds,
       triage_labels, status, requested_by, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?)`,
  ).run(
    newPublicId('ana'),
    input.scanRef,
    input.model.id,
    input.model.name,
    input.model.version,
    input.model.sha256,
    JSON.stringify(input.thresholds),
    JSON.stringify(input.triageLabels),
    input.requestedBy,
    input.at,
  );
  return findAnalysisJobById(db, Number(info.lastInsertRowid)) as AnalysisJobRow;
}

export function findAnalysisJob(db: Database, publicId: string): AnalysisJobRow | undefined {
  return sql(db, `${JOB_SELECT} WHERE a.public_id = ?`).get(publicId) as AnalysisJobRow | undefined;
}

export function findAnalysisJobById(db: Database, id: number): AnalysisJobRow | undefined {
  return sql(db, `${JOB_SELECT} WHERE a.id = ?`).get(id) as AnalysisJobRow | undefined;
}

/** The scan's queued or running analysis, if any (at most one by construction). */
export function findActiveAnalysis(db: Database, scanRef: number): AnalysisJobRow | undefined {
  return sql(db, `${JOB_SELECT} WHERE a.scan_ref = ? AND a.status IN ('queued', 'running') ORDER BY a.id LIMIT 1`).get(scanRef) as
    | AnalysisJobRow
    | undefined;
}

export function listRunningAnalyses(db: Database): AnalysisJobRow[] {
  return sql(db, `${JOB_SELECT} WHERE a.status = 'running' ORDER BY a.id`).all() as AnalysisJobRow[];
}

export function listQueuedAnalyses(db: Database): AnalysisJobRow[] {
  return sql(db, `${JOB_SELECT} WHERE a.status = 'queued' ORDER BY a.id`).all() as AnalysisJobRow[];
}

/** Takes a queued job for this process; undefined when another process (or a cancel) was first. */
export function claimQueuedAnalysis(db: Database, id: number, pid: number, at: string): AnalysisJobRow | undefined {
  const result = sql(db,
    `UPDATE analyses SET status = 'running', owner_pid = ?, heartbeat_at = ?, started_at = ?, slices_done = 0
     WHERE id = ? AND status = 'queued'`,
  ).run(pid, at, at, id);
  return result.changes === 1 ? findAnalysisJobById(db, id) : undefined;
}

/**
 * Puts a running job back in the queue: its owner stopped cleanly, or died (`interrupted`, which
 * counts against the job: see MAX_INTERRUPTIONS in analysis-queue.ts).
 */
export function requeueAnalysis(db: Database, id: number, expectedPid: number | null, at: string, interrupted = false): boolean {
  const result = sql(db,
    `UPDATE analyses SET status = 'queued', owner_pid = NULL, heartbeat_at = ?, started_at = NULL, slices_done = 0,
       interruptions = interruptions + ?
     WHERE id = ? AND status = 'running' AND owner_pid IS ?`,
  ).run(at, interrupted ? 1 : 0, id, expectedPid);
  return result.changes === 1;
}

/** Records the model actually loaded (a user may have replaced the folder since queuing). */
export function setAnalysisModel(
  db: Database,
  id: number,
  pid: number,
  model: ModelRecord,
  labels: { thresholds: Record<string, number>; triageLabels: TriageLabels },
): void {
  sql(db,
    `UPDATE analyses SET model_id = ?, model_name = ?, model_version = ?, model_sha256 = ?, thresholds = ?, triage_labels = ?
     WHERE id = ? AND status = 'running' AND owner_pid = ?`,
  ).run(model.id, model.name, model.version, model.sha256, JSON.stringify(labels.thresholds), JSON.stringify(labels.triageLabels), id, pid);
}

/** False when the job is no longer this process's to run (cancelled meanwhile). */
export function setAnalysisProgress(db: Database, id: number, pid: number, done: number, total: number, at: string): boolean {
  const result = sql(db,
    `UPDATE analyses SET slices_done = ?, slices_total = ?, heartbeat_at = ?
     WHERE id = ? AND status = 'running' AND owner_pid = ?`,
  ).run(done, total, at, id, pid);
  return result.changes === 1;
}

/** Stores the findings and makes the analysis the scan's result; the caller's transaction also
 * moves the scan. False when the job was cancelled or taken over meanwhile. */
export function completeAnalysis(
  db: Database,
  job: { id: number; scanRef: number; pid: number },
  result: { recommendation: string; findings: readonly FindingInput[]; at: string },
): boolean {
  const updated = sql(db,
    `UPDATE analyses SET status = 'succeeded', recommendation = ?, finished_at = ?, owner_pid = NULL, heartbeat_at = ?,
       slices_done = COALESCE(slices_total, slices_done)
     WHERE id = ? AND status = 'running' AND owner_pid = ?`,
  ).run(result.recommendation, result.at, result.at, job.id, job.pid);
  if (updated.changes !== 1) return false;
  insertFindings(db, job.id, result.findings);
  sql(db, 'UPDATE scans SET latest_analysis_ref = ? WHERE id = ?').run(job.id, job.scanRef);
  return true;
}

/**
 * Ends a job without a result. `from` is the state the caller saw: 'queued' for a cancel before
 * it started, 'running' with the owner's pid for the runner itself or a cancel of a running job.
 */
export function finishAnalysis(
  db: Database,
  id: number,
  from: { status: 'queued' } | { status: 'running'; pid: number | null },
  status: 'failed' | 'not_applicable' | 'cancelled',
  error: string | null,
  at: string,
): boolean {
  const pidClause = from.status === 'running' ? 'AND owner_pid IS @pid' : '';
  const result = sql(db,
    `UPDATE analyses SET status = @status, error = @error, finished_at = @at, owner_pid = NULL, heartbeat_at = @at
     WHERE id = @id AND status = @from ${pidClause}`,
  ).run({ status, error, at, id, from: from.status, ...(from.status === 'running' ? { pid: from.pid } : {}) });
  return result.changes === 1;
}

/** Scans `mia analyze --all` takes: never analysed, failed, or waiting in the queue. */
export function listScansToAnalyse(db: Database): Array<{ id: number; scan_id: string }> {
  return sql(db, `SELECT id, scan_id FROM scans WHERE status IN ('received', 'queued', 'failed') ORDER BY id`).all() as Array<{
    id: number;
    scan_id: string;
  }>;
}

/** Received scans with no analysis at all (never queued, so never judged not applicable). */
export function listNeverAnalysedScans(db: Database): Array<{ id: number; scan_id: string }> {
  return sql(db,
    `SELECT s.id, s.scan_id FROM scans s
     WHERE s.status = 'received' AND NOT EXISTS (SELECT 1 FROM analyses a WHERE a.scan_ref = s.id)
     ORDER BY s.id`,
  ).all() as Array<{ id: number; scan_id: string }>;
}
