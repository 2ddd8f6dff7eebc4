/**
 * SQL for import jobs and the files they rejected. Counts and the checkpoint move in the same
 * transaction as the instances they describe, so after a crash the job row says exactly how
 * far the committed work got.
 */
import { sql, type Database } from '#server/store/database.ts';
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

export function insertImportJob(
  db: Database,
  input: { publicId: string; kind: ImportJobKind; sources: readonly string[]; createdBy: string | null; ownerPid: number; at: string },
): ImportJobRow {
  const info = sql(db,
      `INSERT INTO import_jobs (public_id, kind, sources, status, owner_pid, heartbeat_at, created_by, created_at, updated_at)
       VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?)`,
    )
    .run(input.publicId, input.kind, JSON.stringify(input.sources), input.ownerPid, input.at, input.createdBy, input.at, input.at);
  return sql(db, 'SELECT * FROM import_jobs WHERE id = ?').get(info.lastInsertRowid) as ImportJobRow;
}

export function findImportJob(db: Database, publicId: string): ImportJobRow | undefined {
  return sql(db, 'SELECT * FROM import_jobs WHERE public_id = ?').get(publicId) as ImportJobRow | undefined;
}

export function findImportJobById(db: Database, id: number): ImportJobRow | undefined {
  return sql(db, 'SELECT * FROM import_jobs WHERE id = ?').get(id) as ImportJobRow | undefined;
}

/** Newest first: the list a user checks is about the job they just started. */
export function listImportJobs(db: Database, filter: { status?: ImportJobStatus | undefined }, page: PageRequest): Page<ImportJobRow> {
  const rows = sql(db,
      `SELECT * FROM import_jobs WHERE (@after = 0 OR id < @after) AND (@status IS NULL OR status = @status)
       ORDER BY id DESC LIMIT @limit`,
    )
    .all({ after: page.afterId, status: filter.status ?? null, limit: page.limit + 1 }) as ImportJobRow[];
  return toPage(rows, page.limit);
}

export function listRunningImportJobs(db: Database): ImportJobRow[] {
  return sql(db, `SELECT * FROM import_jobs WHERE status = 'running' ORDER BY id`).all() as ImportJobRow[];
}

export function setImportJobTotal(db: Database, id: number, total: number, at: string): void {
  sql(db, 'UPDATE import_jobs SET files_total = ?, updated_at = ?, heartbeat_at = ? WHERE id = ?').run(total, at, at, id);
}

export function addImportJobProgress(db: Database, id: number, delta: JobCountsDelta, checkpointDelta: number, at: string): void {
  sql(db,
    `UPDATE import_jobs SET files_seen = files_seen + @filesSeen, imported = imported + @imported,
       duplicates = duplicates + @duplicates, conflicts = conflicts + @conflicts, rejected = rejected + @rejected,
       bytes = bytes + @bytes, checkpoint = checkpoint + @checkpointDelta, updated_at = @at, heartbeat_at = @at
     WHERE id = @id`,
  ).run({ ...delta, checkpointDelta, at, id });
}

export function insertImportReject(
  db: Database,
  jobRef: number,
  reject: { outcome: 'rejected' | 'conflict'; path: string; reason: string; sopInstanceUid: string | null },
): void {
  sql(db, 'INSERT INTO import_rejects (job_ref, outcome, path, reason, sop_instance_uid) VALUES (?, ?, ?, ?, ?)').run(
    jobRef,
    reject.outcome,
    reject.path,
    reject.reason,
    reject.sopInstanceUid,
  );
}

export function listImportRejects(db: Database, jobRef: number, afterId: number, limit: number): ImportRejectRow[] {
  return sql(db, 'SELECT id, outcome, path, reason, sop_instance_uid FROM import_rejects WHERE job_ref = ? AND id > ? ORDER BY id LIMIT ?')
    .all(jobRef, afterId, limit) as ImportRejectRow[];
}

export function finishImportJob(db: Database, id: number, status: ImportJobStatus, error: string | null, at: string): void {
  sql(db,
    `UPDATE import_jobs SET status = ?, error = ?, owner_pid = NULL, updated_at = ?, finished_at = ? WHERE id = ? AND status = 'running'`,
  ).run(status, error, at, at, id);
}

/**
 * Ends a job whose owner died, if it is still the job the caller saw. A resumable one keeps
 * finished_at empty: `interrupted` with no finish is what resumeAbandonedJobs and a re-run of
 * the same import pick up again (listResumableImportJobs).
 */
export function interruptImportJob(
  db: Database,
  id: number,
  seen: { ownerPid: number | null; heartbeatAt: string | null },
  resumable: boolean,
  error: string,
  at: string,
): boolean {
  const result = sql(db,
      `UPDATE import_jobs SET status = 'interrupted', error = ?, owner_pid = NULL, updated_at = ?, finished_at = ?,
         interrupted_at_checkpoint = checkpoint
       WHERE id = ? AND status = 'running' AND owner_pid IS ? AND heartbeat_at IS ?`,
    )
    .run(error, at, resumable ? null : at, id, seen.ownerPid, seen.heartbeatAt);
  return result.changes === 1;
}

/** Ends a job whose owner died, for good: it failed the same way before (see migration 7). */
export function failAbandonedImportJob(db: Database, id: number, seen: { ownerPid: number | null; heartbeatAt: string | null }, error: string, at: string): boolean {
  const result = sql(db,
      `UPDATE import_jobs SET status = 'failed', error = ?, owner_pid = NULL, updated_at = ?, finished_at = ?
       WHERE id = ? AND status = 'running' AND owner_pid IS ? AND heartbeat_at IS ?`,
    )
    .run(error, at, at, id, seen.ownerPid, seen.heartbeatAt);
  return result.changes === 1;
}

export function listResumableImportJobs(db: Database): ImportJobRow[] {
  return sql(db, `SELECT * FROM import_jobs WHERE status = 'interrupted' AND finished_at IS NULL ORDER BY id`).all() as ImportJobRow[];
}

/** Takes a resumable interrupted job for this process; false if another process took it first. */
export function reclaimImportJob(db: Database, id: number, pid: number, at: string): boolean {
  const result = sql(db,
      `UPDATE import_jobs SET status = 'running', error = NULL, owner_pid = ?, heartbeat_at = ?, updated_at = ?
       WHERE id = ? AND status = 'interrupted' AND finished_at IS NULL`,
    )
    .run(pid, at, at, id);
  return result.changes === 1;
}

/** A process stopping cleanly lets go of its jobs; the next start resumes them. */
export function releaseImportJob(db: Database, id: number, at: string): void {
  sql(db, `UPDATE import_jobs SET owner_pid = NULL, updated_at = ? WHERE id = ? AND status = 'running'`).run(at, id);
}
