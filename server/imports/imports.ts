/** What the import routes do: start path imports, store uploads, show and follow jobs. */
import { setTimeout as sleep } from 'node:timers/promises';
import type { ImportJob } from '#server/api/import-schemas.ts';
import { MiaError, notFound } from '#server/errors.ts';
import type { ImportService } from '#server/imports/import-service.ts';
import { toImportCounts, toImportJob, toImportReject } from '#server/imports/import-views.ts';
import { receiveUpload } from '#server/imports/upload.ts';
import type { Services } from '#server/services.ts';

/** Starting an import needs the runtime's import service. */
export type ImportDeps = Services & { imports: ImportService };
import {
  findImportJob,
  findImportJobById,
  listImportJobs as listJobRows,
  listImportRejects,
  type ImportJobRow,
  type ImportJobStatus,
} from '#server/store/import-jobs.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import type { Readable } from 'node:stream';

/** Rejects shown in a job record; SSE `reject` events carry them all. */
export const SHOWN_REJECTS = 500;
const FOLLOW_POLL_MS = 200;

export async function startPathImport(services: ImportDeps, path: string, createdBy: string): Promise<ImportJob> {
  if (services.config.hubMode) {
    // A hub's disks are not the caller's; data reaches a hub as uploads.
    throw new MiaError('forbidden', 'Importing server paths is disabled on a hub', 'upload instances with POST /v1/instances instead');
  }
  const job = await services.imports.startPathJob([path], createdBy);
  return toImportJob(job, []);
}

async function jobRow(services: Services, id: string): Promise<ImportJobRow> {
  const row = await findImportJob(services.db, id);
  if (!row) throw notFound('Import', id);
  return row;
}

export async function getImportJob(services: Services, id: string): Promise<ImportJob> {
  const row = await jobRow(services, id);
  return toImportJob(row, await listImportRejects(services.db, row.id, 0, SHOWN_REJECTS));
}

export async function listImports(services: Services, filter: { status?: ImportJobStatus | undefined }, page: PageRequest): Promise<Page<Omit<ImportJob, 'rejects'>>> {
  const rows = await listJobRows(services.db, filter, page);
  return {
    items: rows.items.map((row) => {
      const { rejects: _rejects, ...summary } = toImportJob(row, []);
      return summary;
    }),
    nextAfterId: rows.nextAfterId,
  };
}

type Send = (event: string, data: unknown) => void;

/**
 * Follows a job from the database, so jobs run by `mia import` in another process are followed
 * the same way: `progress` when counts change, one `reject` per rejected file, then `done`.
 */
export async function importEvents(services: Services, id: string): Promise<(sink: { send: Send; signal: AbortSignal }) => Promise<void>> {
  const first = await jobRow(services, id);
  return async ({ send, signal }) => {
    let lastReject = 0;
    let lastCounts = '';
    for (;;) {
      const row = await findImportJobById(services.db, first.id) ?? first;
      for (;;) {
        const rejects = await listImportRejects(services.db, row.id, lastReject, 200);
        for (const r of rejects) send('reject', toImportReject(r));
        lastReject = rejects.at(-1)?.id ?? lastReject;
        if (rejects.length < 200) break;
      }
      const counts = toImportCounts(row);
      const signature = JSON.stringify(counts);
      if (signature !== lastCounts) {
        lastCounts = signature;
        send('progress', { id: row.public_id, status: row.status, counts });
      }
      if (row.status !== 'running') {
        const { rejects: _rejects, ...summary } = toImportJob(row, []);
        send('done', summary);
        return;
      }
      try {
        await sleep(FOLLOW_POLL_MS, undefined, { signal });
      } catch {
        return;
      }
    }
  };
}

export type StoredInstances = {
  job_id: string;
  counts: ImportJob['counts'];
  outcomes: Array<{ part: number; outcome: 'imported' | 'duplicate' | 'conflict' | 'rejected'; sop_instance_uid: string | null; scan_id: string | null; reason: string | null }>;
};

/**
 * STOW-RS style storage (PS3.18 10.5). A single bad body is 422 with the reason; a multipart
 * body is 422 only when nothing in it was stored or already present.
 */
export async function storeInstances(
  services: ImportDeps,
  body: { contentType: string; stream: Readable; maxBytes: number },
  createdBy: string,
): Promise<StoredInstances> {
  const upload = await receiveUpload(services.dataDir, body, services.config.httpLimits.maxUploadParts);
  const { job, outcomes } = await services.imports.importUpload(upload, createdBy);
  const result: StoredInstances = {
    job_id: job.public_id,
    counts: toImportCounts(job),
    outcomes: outcomes.map((o) => ({
      part: o.part,
      outcome: o.outcome,
      sop_instance_uid: 'sop_instance_uid' in o ? o.sop_instance_uid : null,
      scan_id: 'scan_id' in o ? o.scan_id : null,
      reason: 'reason' in o ? o.reason : null,
    })),
  };
  const stored = result.outcomes.filter((o) => o.outcome === 'imported' || o.outcome === 'duplicate');
  if (stored.length === 0) {
    const reasons = result.outcomes.map((o) => (upload.multipart ? `part ${o.part}: ${o.reason ?? o.outcome}` : (o.reason ?? o.outcome)));
    const conflictOnly = result.outcomes.every((o) => o.outcome === 'conflict');
    if (conflictOnly) throw new MiaError('conflict', 'Instance already stored with different content', reasons.join('; ').slice(0, 2000));
    throw new MiaError('unprocessable', upload.multipart ? 'No part is a storable DICOM image' : 'Not a storable DICOM image', reasons.join('; ').slice(0, 2000));
  }
  return result;
}
