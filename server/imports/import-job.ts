/**
 * The one import job: a list of files (from folders, a disc, an upload or the watch folder) taken
 * through prepare -> durable archive -> batched commit, with counts and a checkpoint in the job
 * row. A job belongs to the process that runs it (owner_pid + heartbeat); a job left `running`
 * by a process that died is resumed from its checkpoint by the next mia that looks.
 */
import { randomBytes } from 'node:crypto';
import type { ServerConfig } from '#server/config.ts';
import { MiaError } from '#server/errors.ts';
import { createArchiveWriter } from '#server/imports/archive.ts';
import { commitBatch, prepareFile, prepareStagedFile, type FileOutcome, type ImportFile, type Prepared } from '#server/imports/ingest.ts';
import { listSourceFiles } from '#server/imports/sources.ts';
import { codeOf, failureReason } from '#server/storage-errors.ts';
import type { Clock } from '#server/clock.ts';
import type { Logger } from '#server/log.ts';
import type { Database } from '#server/store/database.ts';
import type { Replica } from '#server/sync/replica.ts';
import { claimImport, isAbandoned as isJobAbandoned, ownerOf } from '#server/jobs/jobs.ts';
import type { JobNode } from '#server/jobs/node.ts';
import {
  finishImportJob,
  findImportJobById,
  insertImportJob,
  failAbandonedImportJob,
  interruptImportJob,
  listResumableImportJobs,
  listRunningImportJobs,
  releaseImportJob,
  setImportJobTotal,
  type ImportJobKind,
  type ImportJobRow,
} from '#server/store/import-jobs.ts';

/** What managing import jobs needs; running one also records its changes for sync (`ImportDeps`). */
export type ImportJobDeps = { db: Database; clock: Clock; dataDir: string; node: JobNode; log?: Logger | undefined; config?: ServerConfig | undefined };
export type ImportDeps = ImportJobDeps & { replica: Replica };

export type RunOptions = {
  /** Called after each committed batch with the job row as committed. */
  onBatch?: (job: ImportJobRow, outcomes: readonly FileOutcome[]) => void;
  /** Stops between batches; the job stays `running` without an owner and resumes later. */
  signal?: AbortSignal | undefined;
  batchSize?: number;
};

/** 50-200 instances per transaction amortise the commit; 100 keeps a batch's memory small. */
const DEFAULT_BATCH = 100;
export function newImportJobId(): string {
  return `imp_${randomBytes(12).toString('hex')}`;
}

function now(deps: ImportJobDeps): string {
  return deps.clock.now().toISOString();
}

export async function isAbandoned(deps: ImportJobDeps, job: ImportJobRow, nowMs: number): Promise<boolean> {
  return job.status === 'running' && (await isJobAbandoned(deps.db, deps.node, 'import', job, nowMs));
}

export async function createImportJob(
  deps: ImportJobDeps,
  kind: ImportJobKind,
  sources: readonly string[],
  createdBy: string | null,
  filesTotal?: number,
): Promise<ImportJobRow> {
  return await insertImportJob(deps.db, { publicId: newImportJobId(), kind, sources, createdBy, owner: ownerOf(deps.node), at: now(deps), ...(filesTotal === undefined ? {} : { filesTotal }) });
}

/** Batches whose files may still be on their way to disk while the next one is prepared. */
const FLUSHING_BATCHES = 2;

/**
 * Bytes read and not yet written into the archive: the writes run on the thread pool while the
 * next files are read, and a folder of large multi-frame files must not all sit in memory.
 */
const MAX_WRITING_BYTES = 64 * 1024 * 1024;

/** Files prepared between yields to the event loop, so a server stays responsive while importing. */
const YIELD_EVERY = 16;

/**
 * Runs `files` from index `start` through the pipeline. Returns false when stopped by the
 * signal (the job then stays running, released for a later resume).
 */
async function runFiles(deps: ImportDeps, job: ImportJobRow, files: readonly ImportFile[], start: number, options: RunOptions): Promise<boolean> {
  const archive = createArchiveWriter(deps.dataDir);
  const batchSize = options.batchSize ?? DEFAULT_BATCH;
  // Batches' fsyncs (disk time) run while the next batches are read and parsed (CPU time); each
  // is committed, in order, once its files are durable: durable before visible, and the
  // checkpoint only ever covers committed files. Several in flight ride out a slow fsync.
  const flushing: { done: Promise<void>; prepared: Prepared[] }[] = [];
  const commitOldest = async (): Promise<void> => {
    const oldest = flushing.shift();
    if (!oldest) return;
    await oldest.done;
    const { outcomes, job: row } = await commitBatch(deps.db, deps.replica, job.id, oldest.prepared, now(deps));
    if (row) options.onBatch?.(row, outcomes);
  };
  try {
    for (let i = start; i < files.length; i += batchSize) {
      if (options.signal?.aborted) {
        while (flushing.length > 0) await commitOldest();
        return false;
      }
      const slice = files.slice(i, i + batchSize);
      const prepared: Prepared[] = [];
      for (const file of slice) {
        prepared.push(file.synced ? await prepareStagedFile(deps.db, archive, file, file.synced) : await prepareFile(deps.db, archive, file));
        await archive.room(MAX_WRITING_BYTES);
        if (prepared.length % YIELD_EVERY === 0) await new Promise<void>((resolve) => setImmediate(resolve));
      }
      flushing.push({ done: archive.flush(), prepared });
      while (flushing.length > FLUSHING_BATCHES) await commitOldest();
    }
    while (flushing.length > 0) await commitOldest();
    return true;
  } finally {
    // A failure: what is still flushing is never indexed (at worst unreferenced archive files,
    // which a re-import writes over); waited for, so no temporary file outlives the job.
    await Promise.allSettled(flushing.map((f) => f.done));
    await archive.discard();
  }
}

async function finish(deps: ImportJobDeps, job: ImportJobRow, status: 'completed' | 'failed' | 'interrupted', error: string | null): Promise<ImportJobRow> {
  const row = (await finishImportJob(deps.db, job.id, status, error, now(deps))) ?? (await findImportJobById(deps.db, job.id)) ?? job;
  deps.log?.info('import.finished', {
    job_id: row.public_id,
    kind: row.kind,
    status: row.status,
    files_seen: row.files_seen,
    imported: row.imported,
    duplicates: row.duplicates,
    conflicts: row.conflicts,
    rejected: row.rejected,
  });
  return row;
}

/**
 * Records why a job failed, the cause first ("The disk holding the data folder is full (ENOSPC:
 * ...)"). When even that cannot be written (the database is on the full disk too), the job's
 * original error still reaches the caller, and the job stays running until the next start
 * finds its owner gone.
 */
async function finishFailed(deps: ImportJobDeps, job: ImportJobRow, err: unknown): Promise<void> {
  try {
    await finish(deps, job, 'failed', failureReason(err, 'import failed'));
  } catch (recordErr) {
    deps.log?.error('import.finish_failed', { job_id: job.public_id, error: codeOf(recordErr) ?? 'unknown' });
  }
}

/** Runs a job over a known list of files (uploads, watch folder batches). */
export async function runFileJob(deps: ImportDeps, job: ImportJobRow, files: readonly ImportFile[], options: RunOptions = {}): Promise<ImportJobRow> {
  const release = deps.node.hold('import', job.id);
  try {
    // An upload's job is created knowing its total.
    if (job.files_total !== files.length) await setImportJobTotal(deps.db, job.id, files.length, now(deps));
    const done = await runFiles(deps, job, files, job.checkpoint, options);
    if (!done) {
      await releaseImportJob(deps.db, job.id, now(deps));
      return await findImportJobById(deps.db, job.id) ?? job;
    }
    return await finish(deps, job, 'completed', null);
  } catch (err) {
    await finishFailed(deps, job, err);
    throw err;
  } finally {
    release();
  }
}

/** Runs (or resumes, from its checkpoint) a job over files and folders on this machine. */
export async function runPathJob(deps: ImportDeps, job: ImportJobRow, options: RunOptions = {}): Promise<ImportJobRow> {
  const release = deps.node.hold('import', job.id);
  try {
    const sources = JSON.parse(job.sources) as string[];
    const listing = await listSourceFiles(sources);
    if (listing.missing.length > 0 || listing.unusable.length > 0) {
      return await finish(deps, job, 'interrupted', `source no longer available: ${[...listing.missing, ...listing.unusable].join(', ')}`);
    }
    const files = listing.files.map((file) => ({ path: file, file }));
    await setImportJobTotal(deps.db, job.id, files.length, now(deps));
    const done = await runFiles(deps, job, files, Math.min(job.checkpoint, files.length), options);
    if (!done) {
      await releaseImportJob(deps.db, job.id, now(deps));
      return await findImportJobById(deps.db, job.id) ?? job;
    }
    return await finish(deps, job, 'completed', null);
  } catch (err) {
    await finishFailed(deps, job, err);
    throw err;
  } finally {
    release();
  }
}

/** Refuses sources that do not exist before a job is created for them. */
export async function checkSources(sources: readonly string[]): Promise<void> {
  const listing = await listSourceFiles(sources);
  if (listing.missing.length > 0) {
    throw new MiaError('not_found', 'Import source not found', `no file or folder at ${listing.missing.join(', ')}`);
  }
  if (listing.unusable.length > 0) {
    throw new MiaError('invalid', 'Import source is neither a file nor a folder', `${listing.unusable.join(', ')}: only files and folders of DICOM files are imported`);
  }
}

/** Takes over a job whose owner died; false if another process was quicker or it is alive. */
export async function claimIfAbandoned(deps: ImportDeps, job: ImportJobRow): Promise<ImportJobRow | undefined> {
  let seen: ImportJobRow | undefined = job;
  if (seen.status === 'running') {
    if (!(await isAbandoned(deps, seen, deps.clock.now().getTime()))) return undefined;
    // Through the same door as the clean-up at open, so each death is counted once.
    await endAbandonedJob(deps, seen);
    seen = await findImportJobById(deps.db, job.id);
  }
  if (seen?.status !== 'interrupted' || seen.finished_at !== null) return undefined;
  if (!await claimImport(deps.db, deps.node, seen.id, now(deps))) return undefined;
  return await findImportJobById(deps.db, seen.id);
}

/** Jobs another process may take over: left running by a dead owner, or interrupted and resumable. */
async function unownedJobs(deps: ImportDeps): Promise<ImportJobRow[]> {
  return [...await listRunningImportJobs(deps.db), ...await listResumableImportJobs(deps.db)];
}

/** The abandoned path job with exactly these sources, claimed for this process, if any. */
export async function claimAbandonedPathJob(deps: ImportDeps, sources: readonly string[]): Promise<ImportJobRow | undefined> {
  const wanted = JSON.stringify(sources);
  for (const job of await unownedJobs(deps)) {
    if (job.kind !== 'path' || job.sources !== wanted) continue;
    const claimed = await claimIfAbandoned(deps, job);
    if (claimed) return claimed;
  }
  return undefined;
}

const NOT_REPLAYABLE = 'the process importing this stopped before it finished; send the files again';

/**
 * Run by every mia process that opens the data folder (leftovers.ts): a job whose owner died
 * stops showing `running`. A path job becomes `interrupted` and stays resumable (a re-run of
 * the same import, or the next server start, continues it from its checkpoint); uploads and
 * watch batches cannot be replayed and end `interrupted`, as resumeAbandonedJobs ends them.
 * Returns how many jobs it ended.
 */
export async function interruptAbandonedJobs(deps: ImportJobDeps): Promise<number> {
  let count = 0;
  const nowMs = deps.clock.now().getTime();
  for (const job of await listRunningImportJobs(deps.db)) {
    if ((await isAbandoned(deps, job, nowMs)) && await endAbandonedJob(deps, job)) count += 1;
  }
  return count;
}

/**
 * A path job becomes resumable-interrupted, unless its process already died at this same
 * checkpoint: then a file of the batch after it takes the process down, and resuming would
 * only do so again at every start, so the job fails with the files it did not reach named.
 */
async function endAbandonedJob(deps: ImportJobDeps, job: ImportJobRow): Promise<boolean> {
  const seen = { owner: { node: job.owner_node, pid: job.owner_pid }, heartbeatAt: job.heartbeat_at };
  const resumable = job.kind === 'path';
  if (resumable && job.interrupted_at_checkpoint === job.checkpoint) {
    const reason =
      `the process importing this stopped twice at file ${job.checkpoint + 1}` +
      `${job.files_total !== null ? ` of ${job.files_total}` : ''} without getting further; not resumed again ` +
      `(files from there on were not imported: import them again, or in smaller folders, to find the one at fault)`;
    if (!await failAbandonedImportJob(deps.db, job.id, seen, reason, now(deps))) return false;
    deps.log?.error('import.given_up', { job_id: job.public_id, checkpoint: job.checkpoint });
    return true;
  }
  const reason = resumable
    ? `the process importing this stopped after ${job.files_seen} files; it resumes when the same import runs again or the server next starts`
    : NOT_REPLAYABLE;
  if (!await interruptImportJob(deps.db, job.id, seen, resumable, reason, now(deps))) return false;
  deps.log?.info('import.interrupted', { job_id: job.public_id, kind: job.kind, resumable });
  return true;
}

/**
 * Resumes every abandoned job: path jobs from their checkpoint (or `interrupted` when the
 * source is gone); uploads and watch batches cannot be replayed and become `interrupted`.
 */
export async function resumeAbandonedJobs(deps: ImportDeps, options: RunOptions = {}): Promise<ImportJobRow[]> {
  const resumed: ImportJobRow[] = [];
  for (const job of await unownedJobs(deps)) {
    if (options.signal?.aborted) break;
    const claimed = await claimIfAbandoned(deps, job);
    if (!claimed) continue;
    if (claimed.kind !== 'path') {
      resumed.push(await finish(deps, claimed, 'interrupted', NOT_REPLAYABLE));
      continue;
    }
    resumed.push(await runPathJob(deps, claimed, options));
  }
  return resumed;
}
