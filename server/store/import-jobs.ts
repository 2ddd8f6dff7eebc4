/**
 * SQL for import jobs and the files they rejected. Counts and the checkpoint move in the same
 * transaction as the instances they describe, so after a crash the job row says exactly how
 * far the committed work got.
 */
import type { JobOwner, SeenOwner } from '#server/store/analysis-jobs.ts';
import type { Database } from '#server/store/database.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type ImportJobKind = 'path' | 'upload' | 'watch';
export type ImportJobStatus = 'running' | 'completed' | 'failed' | 'interrupted';

export type ImportJobRow = {
  id: number;
  public_id: string;
  kind: ImportJobKind;
  sources: string;
  status: ImportJobStatus;
  files_total: number | null;
  files_seen: number;
  imported: number;
  duplicates: number;
  conflicts: number;
  rejected: number;
  bytes: number;
  checkpoint: number;
  owner_node: number | null;
  owner_pid: number | null;
  heartbeat_at: string | null;
  created_by: string | null;
  error: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
  /** The checkpoint at the last death of the process running it (migration 7). */
  interrupted_at_checkpoint: number | null;
};

export type ImportRejectRow = { id: number; outcome: 'rejected' | 'conflict'; path: string; reason: string; sop_instance_uid: string | null };

export type JobCountsDelta = {
  filesSeen: number;
  imported: number;
  duplicates: number;
  conflicts: number;
  rejected: number;
  bytes: number;
};

export async function insertImportJob(
  db: Database,
  input: { publicId: string; kind: ImportJobKind; sources: readonly string[]; createdBy: string | null; owner: JobOwner; at: string; filesTotal?: number },
): Promise<ImportJobRow> {
  return (await db.get(`INSERT INTO import_jobs (public_id, kind, sources, status, owner_node, owner_pid, heartbeat_at, created_by, created_at, updated_at, files_total)
       VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?) RETURNING *`, [input.publicId, input.kind, JSON.stringify(input.sources), input.owner.node, input.owner.pid, input.at, input.createdBy, input.at, input.at, input.filesTotal ?? null])) as ImportJobRow;
}

export async function findImportJob(db: Database, publicId: string): Promise<ImportJobRow | undefined> {
  return (await db.get('SELECT * FROM import_jobs WHERE public_id = ?', [publicId])) as ImportJobRow | undefined;
}

export async function findImportJobById(db: Database, id: number): Promise<ImportJobRow | undefined> {
  return (await db.get('SELECT * FROM import_jobs WHERE id = ?', [id])) as ImportJobRow | undefined;
}

/** Newest first: the list a user checks is about the job they just started. */
export async function listImportJobs(db: Database, filter: { status?: ImportJobStatus | undefined }, page: PageRequest): Promise<Page<ImportJobRow>> {
  const rows = (await db.all(`SELECT * FROM import_jobs WHERE (@after = 0 OR id < @after) AND (CAST(@status AS TEXT) IS NULL OR status = @status)
       ORDER BY id DESC LIMIT @limit`, { after: page.afterId, status: filter.status ?? null, limit: page.limit + 1 })) as ImportJobRow[];
  return toPage(rows, page.limit);
}

export async function listRunningImportJobs(db: Database): Promise<ImportJobRow[]> {
  return (await db.all(`SELECT * FROM import_jobs WHERE status = 'running' ORDER BY id`)) as ImportJobRow[];
}

export async function setImportJobTotal(db: Database, id: number, total: number, at: string): Promise<void> {
  (await db.run('UPDATE import_jobs SET files_total = ?, updated_at = ?, heartbeat_at = ? WHERE id = ?', [total, at, at, id]));
}

/** Adds a batch's counts; the job as it now stands (undefined if it is gone). */
export async function addImportJobProgress(db: Database, id: number, delta: JobCountsDelta, checkpointDelta: number, at: string): Promise<ImportJobRow | undefined> {
  return (await db.get(`UPDATE import_jobs SET files_seen = files_seen + @filesSeen, imported = imported + @imported,
       duplicates = duplicates + @duplicates, conflicts = conflicts + @conflicts, rejected = rejected + @rejected,
       bytes = bytes + @bytes, checkpoint = checkpoint + @checkpointDelta, updated_at = @at, heartbeat_at = @at
     WHERE id = @id RETURNING *`, { ...delta, checkpointDelta, at, id })) as ImportJobRow | undefined;
}

export async function insertImportReject(
  db: Database,
  jobRef: number,
  reject: { outcome: 'rejected' | 'conflict'; path: string; reason: string; sopInstanceUid: string | null },
): Promise<void> {
  (await db.run('INSERT INTO import_rejects (job_ref, outcome, path, reason, sop_instance_uid) VALUES (?, ?, ?, ?, ?)', [jobRef, reject.outcome, reject.path, reject.reason, reject.sopInstanceUid]));
}

export async function listImportRejects(db: Database, jobRef: number, afterId: number, limit: number): Promise<ImportRejectRow[]> {
  return (await db.all('SELECT id, outcome, path, reason, sop_instance_uid FROM import_rejects WHERE job_ref = ? AND id > ? ORDER BY id LIMIT ?', [jobRef, afterId, limit])) as ImportRejectRow[];
}

/** Ends a running job; the finished row, or undefined when the job was no longer running. */
export async function finishImportJob(db: Database, id: number, status: ImportJobStatus, error: string | null, at: string): Promise<ImportJobRow | undefined> {
  return (await db.get(`UPDATE import_jobs SET status = ?, error = ?, owner_node = NULL, owner_pid = NULL, updated_at = ?, finished_at = ?
     WHERE id = ? AND status = 'running' RETURNING *`, [status, error, at, at, id])) as ImportJobRow | undefined;
}

/**
 * Ends a job whose owner died, if it is still the job the caller saw. A resumable one keeps
 * finished_at empty: `interrupted` with no finish is what resumeAbandonedJobs and a re-run of
 * the same import pick up again (listResumableImportJobs).
 */
export async function interruptImportJob(
  db: Database,
  id: number,
  seen: { owner: SeenOwner; heartbeatAt: string | null },
  resumable: boolean,
  error: string,
  at: string,
): Promise<boolean> {
  const result = (await db.run(`UPDATE import_jobs SET status = 'interrupted', error = ?, owner_node = NULL, owner_pid = NULL, updated_at = ?, finished_at = ?,
         interrupted_at_checkpoint = checkpoint
       WHERE id = ? AND status = 'running' AND owner_node IS NOT DISTINCT FROM ? AND owner_pid IS NOT DISTINCT FROM ? AND heartbeat_at IS NOT DISTINCT FROM ?`, [error, at, resumable ? null : at, id, seen.owner.node, seen.owner.pid, seen.heartbeatAt]));
  return result === 1;
}

/** Ends a job whose owner died, for good: it failed the same way before (see migration 7). */
export async function failAbandonedImportJob(db: Database, id: number, seen: { owner: SeenOwner; heartbeatAt: string | null }, error: string, at: string): Promise<boolean> {
  const result = (await db.run(`UPDATE import_jobs SET status = 'failed', error = ?, owner_node = NULL, owner_pid = NULL, updated_at = ?, finished_at = ?
       WHERE id = ? AND status = 'running' AND owner_node IS NOT DISTINCT FROM ? AND owner_pid IS NOT DISTINCT FROM ? AND heartbeat_at IS NOT DISTINCT FROM ?`, [error, at, at, id, seen.owner.node, seen.owner.pid, seen.heartbeatAt]));
  return result === 1;
}

export async function listResumableImportJobs(db: Database): Promise<ImportJobRow[]> {
  return (await db.all(`SELECT * FROM import_jobs WHERE status = 'interrupted' AND finished_at IS NULL ORDER BY id`)) as ImportJobRow[];
}

/** Takes a resumable interrupted job for this process; false if another process took it first. */
export async function reclaimImportJob(db: Database, id: number, owner: JobOwner, at: string): Promise<boolean> {
  const result = (await db.run(`UPDATE import_jobs SET status = 'running', error = NULL, owner_node = ?, owner_pid = ?, heartbeat_at = ?, updated_at = ?
       WHERE id = ? AND status = 'interrupted' AND finished_at IS NULL`, [owner.node, owner.pid, at, at, id]));
  return result === 1;
}

/** A process stopping cleanly lets go of its jobs; the next start resumes them. */
export async function releaseImportJob(db: Database, id: number, at: string): Promise<void> {
  (await db.run(`UPDATE import_jobs SET owner_node = NULL, owner_pid = NULL, updated_at = ? WHERE id = ? AND status = 'running'`, [at, id]));
}
