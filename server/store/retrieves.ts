/** SQL for retrieves from a PACS or DICOMweb server into the archive (migration 28). */
import { allOf } from '#server/store/conditions.ts';
import type { Database } from '#server/store/database.ts';
import type { PageRequest, Page } from '#server/store/page.ts';
import { toPage } from '#server/store/page.ts';
import { newPublicId } from '#server/store/public-id.ts';

export type RetrieveStatus = 'running' | 'completed' | 'partial' | 'failed' | 'interrupted';
export type RetrieveTargetKind = 'study' | 'series' | 'priors';
export type RetrieveMethod = 'c-move' | 'wado-rs';

export type RetrieveRow = {
  id: number;
  public_id: string;
  peer_id: string;
  peer_name: string;
  method: RetrieveMethod;
  target_kind: RetrieveTargetKind;
  study_uid: string | null;
  series_uid: string | null;
  patient_id: string | null;
  /** JSON: the priors' bounds (before, modalities). */
  options: string;
  status: RetrieveStatus;
  /** JSON: one entry per study with its progress (server/query-retrieve/retrieves.ts). */
  studies: string;
  completed: number;
  failed: number;
  warning: number;
  error: string | null;
  owner_node: number | null;
  owner_pid: number | null;
  heartbeat_at: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
};

export type NewRetrieve = Pick<
  RetrieveRow,
  'peer_id' | 'peer_name' | 'method' | 'target_kind' | 'study_uid' | 'series_uid' | 'patient_id' | 'options' | 'status' | 'studies' | 'error' | 'owner_node' | 'owner_pid' | 'created_by'
> & { at: string };

export async function insertRetrieve(db: Database, r: NewRetrieve): Promise<RetrieveRow> {
  const publicId = newPublicId('rtv');
  const finished = r.status === 'running' ? null : r.at;
  await db.run(
    `INSERT INTO retrieves (public_id, peer_id, peer_name, method, target_kind, study_uid, series_uid, patient_id, options, status, studies,
       error, owner_node, owner_pid, heartbeat_at, created_by, created_at, updated_at, finished_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      publicId, r.peer_id, r.peer_name, r.method, r.target_kind, r.study_uid, r.series_uid, r.patient_id, r.options, r.status, r.studies,
      r.error, r.owner_node, r.owner_pid, r.at, r.created_by, r.at, r.at, finished,
    ],
  );
  return (await findRetrieve(db, publicId)) as RetrieveRow;
}

export async function findRetrieve(db: Database, publicId: string): Promise<RetrieveRow | undefined> {
  return await db.get<RetrieveRow>('SELECT * FROM retrieves WHERE public_id = ?', [publicId]);
}

/** Newest first: the id goes down page by page. */
export async function listRetrieveRows(db: Database, filter: { status?: RetrieveStatus | undefined }, page: PageRequest): Promise<Page<RetrieveRow>> {
  const where = allOf([page.afterId > 0 && 'id < @after', filter.status !== undefined && 'status = @status']);
  const rows = await db.all<RetrieveRow>(`SELECT * FROM retrieves WHERE ${where} ORDER BY id DESC LIMIT @limit`, {
    after: page.afterId,
    status: filter.status ?? null,
    limit: page.limit + 1,
  });
  return toPage(rows, page.limit);
}

export type RetrieveProgress = Pick<RetrieveRow, 'studies' | 'completed' | 'failed' | 'warning'>;

/** The runner's progress; written only while this node still runs it. */
export async function updateRetrieveProgress(db: Database, id: number, ownerNode: number, p: RetrieveProgress, at: string): Promise<boolean> {
  const changed = await db.run(
    `UPDATE retrieves SET studies = ?, completed = ?, failed = ?, warning = ?, heartbeat_at = ?, updated_at = ?
     WHERE id = ? AND status = 'running' AND owner_node = ?`,
    [p.studies, p.completed, p.failed, p.warning, at, at, id, ownerNode],
  );
  return changed > 0;
}

export async function finishRetrieve(
  db: Database,
  id: number,
  ownerNode: number | null,
  end: RetrieveProgress & { status: Exclude<RetrieveStatus, 'running'>; error: string | null },
  at: string,
): Promise<boolean> {
  const owner = ownerNode === null ? '' : ' AND owner_node = ?';
  const changed = await db.run(
    `UPDATE retrieves SET status = ?, error = ?, studies = ?, completed = ?, failed = ?, warning = ?, updated_at = ?, finished_at = ?
     WHERE id = ? AND status = 'running'${owner}`,
    [end.status, end.error, end.studies, end.completed, end.failed, end.warning, at, at, id, ...(ownerNode === null ? [] : [ownerNode])],
  );
  return changed > 0;
}

/** Retrieves still marked running, for the check that their runner is alive. */
export async function listRunningRetrieves(db: Database, limit: number): Promise<RetrieveRow[]> {
  return await db.all<RetrieveRow>("SELECT * FROM retrieves WHERE status = 'running' ORDER BY id LIMIT ?", [limit]);
}

/** The newest import job now: jobs made after it belong to what happens next. */
export async function lastImportJobId(db: Database): Promise<number> {
  return Number((await db.get<{ id: number | null }>('SELECT MAX(id) AS id FROM import_jobs'))?.id ?? 0);
}

/** Import jobs a caller (created_by, e.g. dicom:ORTHANC) started after job `afterId`. */
export async function importJobsSince(db: Database, afterId: number, createdBy: string, limit: number): Promise<Array<{ public_id: string; conflicts: number; rejected: number }>> {
  const rows = await db.all<{ public_id: string; conflicts: number; rejected: number }>(
    'SELECT public_id, conflicts, rejected FROM import_jobs WHERE id > ? AND created_by = ? ORDER BY id LIMIT ?',
    [afterId, createdBy, limit],
  );
  return rows.map((r) => ({ public_id: r.public_id, conflicts: Number(r.conflicts), rejected: Number(r.rejected) }));
}

/** The study UIDs of these that the archive holds (for "already here" in search results). */
export async function studiesInArchive(db: Database, studyUids: readonly string[]): Promise<Set<string>> {
  if (studyUids.length === 0) return new Set();
  const rows = await db.all<{ study_uid: string }>(`SELECT study_uid FROM studies WHERE study_uid IN (${studyUids.map(() => '?').join(', ')})`, [...studyUids]);
  return new Set(rows.map((r) => r.study_uid));
}

/** Instances of a study in the archive: what a retrieve brought (or what was already here). */
export async function countStudyInstances(db: Database, studyUid: string): Promise<number> {
  const row = await db.get<{ n: number }>(
    'SELECT COUNT(*) AS n FROM instances i JOIN scans s ON s.id = i.scan_ref JOIN studies st ON st.id = s.study_ref WHERE st.study_uid = ?',
    [studyUid],
  );
  return Number(row?.n ?? 0);
}
