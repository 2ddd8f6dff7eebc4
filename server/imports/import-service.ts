/**
 * Imports as a server runs them: path jobs in the background, uploads in the request, the
 * watch folder, and resuming jobs a dead process left behind. `stop` lets running jobs reach a
 * batch boundary and releases them for the next start, before the database closes.
 */
import {
  checkSources,
  createImportJob,
  resumeAbandonedJobs,
  runFileJob,
  runPathJob,
  type ImportDeps,
} from '#server/imports/import-job.ts';
import type { FileOutcome, ImportFile } from '#server/imports/ingest.ts';
import type { ReceivedUpload } from '#server/imports/upload.ts';
import { watchFolder, type Watcher } from '#server/imports/watch-folder.ts';
import type { Services } from '#server/services.ts';
import type { ImportJobRow } from '#server/store/import-jobs.ts';

export type UploadResult = { job: ImportJobRow; outcomes: Array<FileOutcome & { part: number }> };

export type ImportService = {
  /** Resumes jobs a dead process left behind and watches the folder (a server's background work). */
  start(): void;
  startPathJob(sources: readonly string[], createdBy: string): Promise<ImportJobRow>;
  importUpload(upload: ReceivedUpload, createdBy: string): Promise<UploadResult>;
  stop(): Promise<void>;
};

export function createImportService(s: Services): ImportService {
  const deps: ImportDeps = { db: s.db, clock: s.clock, dataDir: s.dataDir, node: s.node, replica: s.replica, log: s.log, config: s.config };
  const controller = new AbortController();
  const tasks = new Set<Promise<unknown>>();
  const track = (task: Promise<unknown>, what: string): void => {
    const guarded = task.catch((err: unknown) => {
      s.log.error('import.task_failed', { task: what, error: err instanceof Error ? err.name : 'non-error' });
    });
    tasks.add(guarded);
    void guarded.finally(() => tasks.delete(guarded));
  };

  let watcher: Watcher | undefined;
  let takeover: NodeJS.Timeout | undefined;
  let resuming: Promise<unknown> | undefined;
  // What a server does at its start, again while it runs: a job whose process died since (a
  // killed `mia import`) is resumed from its checkpoint, or ended when it cannot be replayed.
  const resume = (): void => {
    if (resuming || controller.signal.aborted) return;
    resuming = resumeAbandonedJobs(deps, { signal: controller.signal });
    track(resuming, 'resume');
    void resuming.catch(() => undefined).finally(() => (resuming = undefined));
  };
  const start = (): void => {
    resume();
    takeover = setInterval(resume, s.config.importTakeoverMs);
    takeover.unref();
    if (!s.config.watchDir) return;
    watcher = watchFolder({
      dir: s.config.watchDir,
      stableMs: s.config.watchStableMs,
      importFiles: async (files) => {
        const job = await createImportJob(deps, 'watch', files, 'watch');
        await runFileJob(deps, job, files.map((file) => ({ path: file, file })), { signal: controller.signal });
      },
      onError: (err) => s.log.error('import.watch_failed', { error: err instanceof Error ? err.name : 'non-error' }),
    });
  };

  return {
    start,
    async startPathJob(sources, createdBy) {
      await checkSources(sources);
      const job = await createImportJob(deps, 'path', sources, createdBy);
      track(runPathJob(deps, job, { signal: controller.signal }), 'path');
      return job;
    },
    async importUpload(upload, createdBy) {
      try {
        const files: ImportFile[] = [];
        const outcomes: UploadResult['outcomes'] = [];
        const wrongType = new Map<number, FileOutcome & { part: number }>();
        for (const part of upload.parts) {
          const mediaType = part.contentType.split(';')[0]?.trim().toLowerCase();
          if (mediaType !== 'application/dicom') {
            wrongType.set(part.index, { part: part.index, outcome: 'rejected', path: `upload part ${part.index}`, reason: `part is ${mediaType ?? 'untyped'}, not application/dicom`, bytes: part.bytes });
          } else {
            files.push({ path: `upload part ${part.index}`, file: part.file, synced: part.synced });
          }
        }
        const job = await createImportJob(deps, 'upload', ['upload'], createdBy, files.length);
        const byPath = new Map<string, FileOutcome>();
        const finished = await runFileJob(deps, job, files, {
          onBatch: (_row, batch) => batch.forEach((o) => byPath.set(o.path, o)),
        });
        for (const part of upload.parts) {
          const known = wrongType.get(part.index) ?? byPath.get(`upload part ${part.index}`);
          if (known) outcomes.push({ ...known, part: part.index });
        }
        return { job: finished, outcomes };
      } finally {
        await upload.discard();
      }
    },
    async stop() {
      clearInterval(takeover);
      controller.abort();
      await watcher?.stop();
      while (tasks.size > 0) await Promise.all([...tasks]);
    },
  };
}
