/** Shapes import job rows into the API's import job record. */
import type { ImportJob } from '#server/api/import-schemas.ts';
import type { ImportJobRow, ImportRejectRow } from '#server/store/import-jobs.ts';

export function toImportCounts(row: ImportJobRow): ImportJob['counts'] {
  return {
    files_total: row.files_total,
    files_seen: row.files_seen,
    imported: row.imported,
    duplicates: row.duplicates,
    conflicts: row.conflicts,
    rejected: row.rejected,
    bytes: row.bytes,
  };
}

export function toImportReject(row: ImportRejectRow): ImportJob['rejects'][number] {
  return { path: row.path, reason: row.reason, outcome: row.outcome, sop_instance_uid: row.sop_instance_uid };
}

export function toImportJob(row: ImportJobRow, rejects: readonly ImportRejectRow[]): ImportJob {
  return {
    id: row.public_id,
    kind: row.kind,
    sources: JSON.parse(row.sources) as string[],
    status: row.status,
    counts: toImportCounts(row),
    rejects: rejects.map(toImportReject),
    rejects_total: row.rejected + row.conflicts,
    error: row.error,
    created_at: row.created_at,
    updated_at: row.updated_at,
    finished_at: row.finished_at,
  };
}
