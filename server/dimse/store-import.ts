/**
 * Instances received by C-STORE go through the import pipeline uploads use (prepareFile: parse,
 * reject rules, digest, archive staging; commitBatch: index), one import job per association,
 * created by the calling AE and listed under /v1/imports like any other. A C-STORE is answered
 * from here only after its instance is fsynced into the archive and its batch committed.
 */
import { createImportJob, type ImportDeps } from '#server/imports/import-job.ts';
import { createArchiveWriter } from '#server/imports/archive.ts';
import { commitBatch, prepareFile, type FileOutcome } from '#server/imports/ingest.ts';
import type { Services } from '#server/services.ts';
import { codeOf, storageErrorOf } from '#server/storage-errors.ts';
import { finishImportJob, setImportJobTotal, type ImportJobRow } from '#server/store/import-jobs.ts';
import { STATUS } from '#server/dimse/command-set.ts';
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

export function createStoreReceiver(s: Services): StoreReceiver {
  const deps: ImportDeps = { db: s.db, clock: s.clock, dataDir: s.dataDir, node: s.node, replica: s.replica, log: s.log, config: s.config };
  const now = (): string => s.clock.now().toISOString();
  return {
    openSession(caller: CallerIdentity): Promise<StoreSession> {
      let job: ImportJobRow | undefined;
      let release: (() => void) | undefined;
      let files = 0;
      const session: StoreSession = {
        async store(file) {
          const archive = createArchiveWriter(s.dataDir);
          try {
            if (!job) {
              job = await createImportJob(deps, 'upload', [`dicom:${caller.callingAeTitle}@${caller.host}`], `dicom:${caller.callingAeTitle}`);
              release = s.node.hold('import', job.id);
            }
            files += 1;
            const prepared = await prepareFile(s.db, archive, { path: `C-STORE ${files} from ${caller.callingAeTitle}`, file });
            await archive.flush();
            const { outcomes } = await commitBatch(s.db, s.replica, job.id, [prepared], now());
            const outcome = outcomes[0];
            return outcome ? storeStatusOf(outcome) : { status: STATUS.outOfResources, errorComment: 'import produced no outcome' };
          } catch (err) {
            // A full or failing disk (or database): the sender may retry later or elsewhere.
            const storage = storageErrorOf(err);
            s.log.error('dimse.store_failed', { calling_ae: caller.callingAeTitle, error: codeOf(err) ?? (err instanceof Error ? err.name : 'non-error') });
            return { status: STATUS.outOfResources, errorComment: storage?.message ?? 'the instance could not be stored' };
          } finally {
            archive.discard();
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
