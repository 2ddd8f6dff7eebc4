/**
 * Instances received by C-STORE go through the import pipeline uploads use (parse, reject rules,
 * digest, archive staging; commitBatch: index), one import job per association, created by the
 * calling AE and listed under /v1/imports like any other. The SCP writes each instance straight
 * into the archive's staging folder, so staging it renames that file instead of writing a copy
 * (prepareStagedFile). A C-STORE is answered from here only after its instance is fsynced into
 * the archive and its batch committed.
 *
 * The index commits of all associations go through one commit queue (commit-queue.ts): the
 * instances that were made durable in the archive while a commit ran are indexed together in the
 * next transaction, each under its own association's job.
 */
import { createImportJob, type ImportDeps } from '#server/imports/import-job.ts';
import { createArchiveWriter } from '#server/imports/archive.ts';
import { commitBatch, prepareStagedFile, type FileOutcome, type Prepared } from '#server/imports/ingest.ts';
import type { Services } from '#server/services.ts';
import { codeOf, storageErrorOf } from '#server/storage-errors.ts';
import { finishImportJob, setImportJobTotal, type ImportJobRow } from '#server/store/import-jobs.ts';
import { STATUS } from '#server/dimse/command-set.ts';
import { createCommitQueue } from '#server/dimse/commit-queue.ts';
import type { CallerIdentity, StoreOutcome, StoreReceiver, StoreSession } from '#server/dimse/scp.ts';

/** C-STORE status of an import outcome (PS3.4 B.2.3): a duplicate is a success for the sender. */
export function storeStatusOf(outcome: FileOutcome): StoreOutcome {
  switch (outcome.outcome) {
    case 'imported':
    case 'duplicate':
      return { status: STATUS.success };
    case 'conflict':
      return { status: STATUS.cannotUnderstand, errorComment: 'SOP Instance UID already stored with other content' };
    case 'rejected':
      return { status: STATUS.cannotUnderstand, errorComment: outcome.reason };
  }
}

/** One instance for the index: prepared and durable in the archive, and the job it counts in. */
type Durable = { jobRef: number; prepared: Prepared };

/**
 * More instances than associations may be open at once never wait together (each association has
 * one C-STORE in flight); the bound keeps a transaction short should that change.
 */
const MAX_COMMIT_GROUP = 256;

export function createStoreReceiver(s: Services): StoreReceiver {
  const deps: ImportDeps = { db: s.db, clock: s.clock, dataDir: s.dataDir, node: s.node, replica: s.replica, log: s.log, config: s.config };
  const now = (): string => s.clock.now().toISOString();
  // One transaction, one durable commit, for the whole group; each job's instances go through
  // commitBatch in a savepoint of it, so each job counts its own files as with a lone batch.
  const index = createCommitQueue<Durable, FileOutcome | undefined>(async (group) => {
    const at = now();
    const byJob = new Map<number, number[]>();
    group.forEach((d, i) => byJob.set(d.jobRef, [...(byJob.get(d.jobRef) ?? []), i]));
    const outcomes: (FileOutcome | undefined)[] = group.map(() => undefined);
    await s.db.transaction(async (tx) => {
      for (const [jobRef, members] of byJob) {
        const { outcomes: got } = await commitBatch(tx, s.replica, jobRef, members.map((i) => group[i]!.prepared), at);
        members.forEach((i, k) => (outcomes[i] = got[k]));
      }
    }, { durable: true, isolation: 'read committed' });
    return outcomes;
  }, MAX_COMMIT_GROUP);
  return {
    openSession(caller: CallerIdentity): Promise<StoreSession> {
      let job: ImportJobRow | undefined;
      let release: (() => void) | undefined;
      let files = 0;
      // One writer for the association's instances, which come one at a time: it remembers the
      // archive folders it has made sure of (measured: a recursive mkdir of two folders for each
      // instance took 0.8 ms of the event loop), and discards only this association's file.
      const archive = createArchiveWriter(s.dataDir);
      const session: StoreSession = {
        async store(file, synced) {
          // Announced before the file's fsyncs: a commit starting meanwhile waits to take it along.
          const slot = index.reserve();
          try {
            if (!job) {
              job = await createImportJob(deps, 'upload', [`dicom:${caller.callingAeTitle}@${caller.host}`], `dicom:${caller.callingAeTitle}`);
              release = s.node.hold('import', job.id);
            }
            files += 1;
            const prepared = await prepareStagedFile(s.db, archive, { path: `C-STORE ${files} from ${caller.callingAeTitle}`, file }, synced);
            await archive.flush();
            const outcome = await slot.submit({ jobRef: job.id, prepared });
            return outcome ? storeStatusOf(outcome) : { status: STATUS.outOfResources, errorComment: 'import produced no outcome' };
          } catch (err) {
            // A full or failing disk (or database): the sender may retry later or elsewhere.
            const storage = storageErrorOf(err);
            s.log.error('dimse.store_failed', { calling_ae: caller.callingAeTitle, error: codeOf(err) ?? (err instanceof Error ? err.name : 'non-error') });
            return { status: STATUS.outOfResources, errorComment: storage?.message ?? 'the instance could not be stored' };
          } finally {
            slot.cancel();
            await archive.discard();
          }
        },
        async close(ending) {
          if (!job) return;
          try {
            await setImportJobTotal(s.db, job.id, files, now());
            const row = ending === 'aborted'
              ? await finishImportJob(s.db, job.id, 'interrupted', 'the association was aborted; instances not acknowledged were not stored', now())
              : await finishImportJob(s.db, job.id, 'completed', null, now());
            s.log.info('import.finished', {
              job_id: job.public_id,
              kind: 'dicom',
              status: row?.status ?? 'unknown',
              imported: row?.imported ?? 0,
              duplicates: row?.duplicates ?? 0,
              rejected: row?.rejected ?? 0,
            });
          } finally {
            release?.();
          }
        },
      };
      return Promise.resolve(session);
    },
  };
}
