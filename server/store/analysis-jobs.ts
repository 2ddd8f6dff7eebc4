/**
 * SQL for analyses as jobs. An analysis row is its own job (migration 3): every state change is
 * conditional on the state the caller saw and, while running, on the owning process, so a
 * cancel, a second process or a restart can never make two writers finish the same job.
 */
import type { ScanStatus } from '#common/vocabulary.ts';
import { insertFindings, type AnalysisRow, type FindingInput, type TriageLabels } from '#server/store/analyses.ts';
import { perDialect, type Database } from '#server/store/database.ts';
import { newPublicId } from '#server/store/public-id.ts';

/** Who runs a job: its node (migration 14) and the pid, shown to people. */
export type JobOwner = { node: number; pid: number };
/** The owner a caller saw on a row, which a conditional write checks: either may be NULL. */
export type SeenOwner = { node: number | null; pid: number | null };

export type AnalysisJobRow = AnalysisRow & {
  scan_id: string;
  modality: string;
  body_part: string | null;
  scan_status: ScanStatus;
  latest_analysis_ref: number | null;
  patient_id: string;
};

export type ModelRecord = { id: string; name: string; version: string; sha256: string };

/** Per-label thresholds and the operating point they came from (null: the manifest's labels). */
export type AnalysisDecision = { operatingPoint: string | null; thresholds: Record<string, number> };

const JOB_SELECT = `
  SELECT a.*, s.scan_id, s.modality, s.body_part, s.status AS scan_status, s.latest_analysis_ref, p.patient_id
  FROM analyses a JOIN scans s ON s.id = a.scan_ref JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref`;

export async function insertQueuedAnalysis(
  db: Database,
  input: { scanRef: number; model: ModelRecord; decision: AnalysisDecision; triageLabels: TriageLabels; requestedBy: string | null; at: string },
): Promise<AnalysisJobRow> {
  const inserted = (await db.get<{ id: number }>(`INSERT INTO analyses (public_id, scan_ref, model_id, model_name, model_version, model_sha256, thresholds,
       operating_point, triage_labels, status, requested_by, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?) RETURNING id`, [newPublicId('ana'), input.scanRef, input.model.id, input.model.name, input.model.version, input.model.sha256, JSON.stringify(input.decision.thresholds), input.decision.operatingPoint, JSON.stringify(input.triageLabels), input.requestedBy, input.at]));
  return (await findAnalysisJobById(db, inserted!.id)) as AnalysisJobRow;
}

export async function findAnalysisJob(db: Database, publicId: string): Promise<AnalysisJobRow | undefined> {
  return (await db.get(`${JOB_SELECT} WHERE a.public_id = ?`, [publicId])) as AnalysisJobRow | undefined;
}

export async function findAnalysisJobById(db: Database, id: number): Promise<AnalysisJobRow | undefined> {
  return (await db.get(`${JOB_SELECT} WHERE a.id = ?`, [id])) as AnalysisJobRow | undefined;
}

/** The scan's queued or running analysis, if any (at most one by construction). */
export async function findActiveAnalysis(db: Database, scanRef: number): Promise<AnalysisJobRow | undefined> {
  return (await db.get(`${JOB_SELECT} WHERE a.scan_ref = ? AND a.status IN ('queued', 'running') ORDER BY a.id LIMIT 1`, [scanRef])) as
    | AnalysisJobRow
    | undefined;
}

export async function listRunningAnalyses(db: Database): Promise<AnalysisJobRow[]> {
  return (await db.all(`${JOB_SELECT} WHERE a.status = 'running' ORDER BY a.id`)) as AnalysisJobRow[];
}

/** Takes a queued job for this process; undefined when another process (or a cancel) was first. */
export async function claimQueuedAnalysis(db: Database, id: number, owner: JobOwner, at: string): Promise<AnalysisJobRow | undefined> {
  const result = (await db.run(`UPDATE analyses SET status = 'running', owner_node = ?, owner_pid = ?, heartbeat_at = ?, started_at = ?, slices_done = 0
     WHERE id = ? AND status = 'queued'`, [owner.node, owner.pid, at, at, id]));
  return result === 1 ? await findAnalysisJobById(db, id) : undefined;
}

/**
 * Takes the oldest queued job for this node. On PostgreSQL, nodes claiming at once skip each
 * other's locked rows (FOR UPDATE SKIP LOCKED) rather than wait and find them taken; SQLite's one
 * writer needs no such clause.
 */
export async function claimNextQueuedAnalysis(db: Database, owner: JobOwner, at: string): Promise<AnalysisJobRow | undefined> {
  const claimed = await db.get<{ id: number }>(CLAIM_NEXT, [owner.node, owner.pid, at, at]);
  return claimed ? await findAnalysisJobById(db, claimed.id) : undefined;
}

const CLAIM_NEXT = perDialect(
  (d) => `UPDATE analyses SET status = 'running', owner_node = ?, owner_pid = ?, heartbeat_at = ?, started_at = ?, slices_done = 0
    WHERE id = (SELECT id FROM analyses WHERE status = 'queued' ORDER BY id LIMIT 1${d === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : ''})
      AND status = 'queued'
    RETURNING id`,
);

/**
 * Puts a running job back in the queue: its owner stopped cleanly, or died (`interrupted`, which
 * counts against the job: see MAX_INTERRUPTIONS in analysis-queue.ts).
 */
export async function requeueAnalysis(db: Database, id: number, seen: SeenOwner, at: string, interrupted = false): Promise<boolean> {
  const result = (await db.run(`UPDATE analyses SET status = 'queued', owner_node = NULL, owner_pid = NULL, heartbeat_at = ?, started_at = NULL, slices_done = 0,
       interruptions = interruptions + ?
     WHERE id = ? AND status = 'running' AND owner_node IS NOT DISTINCT FROM ? AND owner_pid IS NOT DISTINCT FROM ?`, [at, interrupted ? 1 : 0, id, seen.node, seen.pid]));
  return result === 1;
}

/** Records the model actually loaded (a user may have replaced the folder since queuing). */
export async function setAnalysisModel(
  db: Database,
  id: number,
  owner: JobOwner,
  model: ModelRecord,
  labels: { decision: AnalysisDecision; triageLabels: TriageLabels },
): Promise<void> {
  (await db.run(`UPDATE analyses SET model_id = ?, model_name = ?, model_version = ?, model_sha256 = ?, thresholds = ?, operating_point = ?, triage_labels = ?
     WHERE id = ? AND status = 'running' AND owner_node = ?`, [model.id, model.name, model.version, model.sha256, JSON.stringify(labels.decision.thresholds), labels.decision.operatingPoint, JSON.stringify(labels.triageLabels), id, owner.node]));
}

/** False when the job is no longer this process's to run (cancelled meanwhile). */
export async function setAnalysisProgress(db: Database, id: number, owner: JobOwner, done: number, total: number, at: string): Promise<boolean> {
  const result = (await db.run(`UPDATE analyses SET slices_done = ?, slices_total = ?, heartbeat_at = ?
     WHERE id = ? AND status = 'running' AND owner_node = ?`, [done, total, at, id, owner.node]));
  return result === 1;
}

/** Stores the findings and makes the analysis the scan's result; the caller's transaction also
 * moves the scan. False when the job was cancelled or taken over meanwhile. */
export async function completeAnalysis(
  db: Database,
  job: { id: number; scanRef: number; owner: JobOwner },
  result: { recommendation: string; findings: readonly FindingInput[]; at: string },
): Promise<boolean> {
  const updated = (await db.run(`UPDATE analyses SET status = 'succeeded', recommendation = ?, finished_at = ?, owner_node = NULL, owner_pid = NULL, heartbeat_at = ?,
       slices_done = COALESCE(slices_total, slices_done)
     WHERE id = ? AND status = 'running' AND owner_node = ?`, [result.recommendation, result.at, result.at, job.id, job.owner.node]));
  if (updated !== 1) return false;
  await insertFindings(db, job.id, result.findings);
  (await db.run('UPDATE scans SET latest_analysis_ref = ? WHERE id = ?', [job.id, job.scanRef]));
  return true;
}

/**
 * Ends a job without a result. `from` is the state the caller saw: 'queued' for a cancel before
 * it started, 'running' with the owner's pid for the runner itself or a cancel of a running job.
 */
export async function finishAnalysis(
  db: Database,
  id: number,
  from: { status: 'queued' } | { status: 'running'; owner: SeenOwner },
  status: 'failed' | 'not_applicable' | 'cancelled',
  error: string | null,
  at: string,
): Promise<boolean> {
  const ownerClause = from.status === 'running' ? 'AND owner_node IS NOT DISTINCT FROM @node AND owner_pid IS NOT DISTINCT FROM @pid' : '';
  const result = (await db.run(`UPDATE analyses SET status = @status, error = @error, finished_at = @at, owner_node = NULL, owner_pid = NULL, heartbeat_at = @at
     WHERE id = @id AND status = @from ${ownerClause}`, {
    status,
    error,
    at,
    id,
    from: from.status,
    ...(from.status === 'running' ? { node: from.owner.node, pid: from.owner.pid } : {}),
  }));
  return result === 1;
}

/** Scans `mia analyze --all` takes: never analysed, failed, or waiting in the queue. */
export async function listScansToAnalyse(db: Database): Promise<Array<{ id: number; scan_id: string }>> {
  return (await db.all(`SELECT id, scan_id FROM scans WHERE status IN ('received', 'queued', 'failed') ORDER BY id`)) as Array<{
    id: number;
    scan_id: string;
  }>;
}

/** Received scans with no analysis at all (never queued, so never judged not applicable). */
export async function listNeverAnalysedScans(db: Database): Promise<Array<{ id: number; scan_id: string }>> {
  return (await db.all(`SELECT s.id, s.scan_id FROM scans s
     WHERE s.status = 'received' AND NOT EXISTS (SELECT 1 FROM analyses a WHERE a.scan_ref = s.id)
     ORDER BY s.id`)) as Array<{ id: number; scan_id: string }>;
}
