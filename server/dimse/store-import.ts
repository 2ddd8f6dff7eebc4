/**
 * Instances received by C-STORE go through the import pipeline uploads use (parse, reject rules,
 * digest: `inspect`; archive; `commitBatch`: index), one import job per association, created by
 * the calling AE and listed under /v1/imports like any other.
 *
 * An instance received in memory (all but very large ones) is answered once it is checked and
 * durable in the intake log (intake-log.ts); the indexer archives and indexes it moments later,
 * with whatever else arrived meanwhile, in one transaction. A refusal (no pixel data, a syntax mia
 * cannot decode, another instance under the same UID) is answered before anything is written. A
 * very large instance, spooled to a file as it arrived, is answered only once it is indexed, as
 * before the log. An association's release is answered once its instances are indexed, so a
 * sender that has finished sees them in mia's worklist and queries.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { unlink } from 'node:fs/promises';
import { createImportJob, type ImportDeps } from '#server/imports/import-job.ts';
import { createArchiveWriter } from '#server/imports/archive.ts';
import { abandonedSegments, openIntakeLog, readIntakeSegment, removeAbandonedSpares, type Appended } from '#server/imports/intake-log.ts';
import { commitBatch, inspect, type FileOutcome, type Inspected, type Prepared } from '#server/imports/ingest.ts';
import type { Services } from '#server/services.ts';
import { codeOf, storageErrorOf } from '#server/storage-errors.ts';
import { finishImportJob, setImportJobTotal, type ImportJobRow } from '#server/store/import-jobs.ts';
import { STATUS } from '#server/dimse/command-set.ts';
import type { CallerIdentity, ReceivedInstance, StoreOutcome, StoreReceiver, StoreSession } from '#server/dimse/scp.ts';

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

/** Where an item's bytes are for the archive: in memory (and the intake log), or a spool file. */
type Source = { kind: 'bytes'; bytes: Buffer; record: Appended } | { kind: 'file'; file: string; synced: Promise<void> | undefined } | { kind: 'none' };

/** One instance for the indexer, and the job it counts in. */
type Item = {
  jobRef: number;
  checked: Inspected;
  source: Source;
  /** Settles once the item is indexed (its outcome), or could not be (only for items not answered yet). */
  resolve: (outcome: FileOutcome | undefined) => void;
  reject: (err: unknown) => void;
};

/** One transaction indexes at most this many instances, or this many bytes of them. */
const BATCH_ITEMS = 256;
const BATCH_BYTES = 64 * 1024 * 1024;
/**
 * Answered and not yet indexed, held in memory: past this, a new instance waits before it is
 * answered (the indexer catches up) rather than memory growing with a fast sender.
 */
const BACKLOG_BYTES = 64 * 1024 * 1024;
/** How long the indexer waits for a batch to fill before it indexes what it has (the default). */
export const INDEX_LINGER_MS = 100;
/** After a failed batch (a full disk), its answered instances are tried again after these. */
const RETRY_MS = [500, 1000, 2000, 5000, 10_000, 30_000];

export type IntakeReceiver = StoreReceiver & {
  /** Indexes what a process that is gone left in the intake log (answered, never indexed). */
  recover(): Promise<void>;
  /**
   * The server is stopping: a batch that cannot be indexed now (a full disk) is no longer tried
   * again but left in the intake log for the next start, so associations and recovery waiting on
   * it can end. Called before the DICOM listener's stop, which waits for them.
   */
  stopping(): void;
  /** Indexes what was answered, then closes the log. */
  stop(): Promise<void>;
};

export function createStoreReceiver(s: Services, options: { lingerMs: number }): IntakeReceiver {
  const deps: ImportDeps = { db: s.db, clock: s.clock, dataDir: s.dataDir, node: s.node, replica: s.replica, log: s.log, config: s.config };
  const now = (): string => s.clock.now().toISOString();
  const intake = openIntakeLog(s.dataDir, (what, err) => s.log.error(what, { error: codeOf(err) ?? (err instanceof Error ? err.name : 'non-error') }));
  // One writer for every batch: it remembers the archive folders it has made sure of.
  const archive = createArchiveWriter(s.dataDir);
  let queue: Item[] = [];
  let backlogBytes = 0;
  let indexing: Promise<void> | undefined;
  let failures = 0;
  let stopping = false;
  let wakeRetry: (() => void) | undefined;
  let lingerWake: (() => void) | undefined;
  /** Releases (and stops) waiting for the index: no lingering while there are any. */
  let hurry = 0;
  const roomWaiters = new Set<() => void>();
  /** SOP Instance UID to digest of what is answered and not yet indexed: the index cannot tell yet. */
  const unindexed = new Map<string, string>();

  const sizeOf = (item: Item): number => (item.source.kind === 'bytes' ? item.source.bytes.length : 0);
  const took = (item: Item): void => {
    backlogBytes -= sizeOf(item);
    if (item.source.kind === 'bytes' && item.checked.kind === 'store' && unindexed.get(item.checked.instance.sopInstanceUid) === item.checked.sha256) {
      unindexed.delete(item.checked.instance.sopInstanceUid);
    }
    if (backlogBytes <= BACKLOG_BYTES) for (const wake of [...roomWaiters]) wake();
  };

  const indexBatch = async (batch: readonly Item[]): Promise<(FileOutcome | undefined)[]> => {
    const prepared: Prepared[] = batch.map((item) => {
      const { checked, source } = item;
      if (checked.kind === 'done') return checked;
      const archivePath = source.kind === 'bytes' ? archive.stage(source.bytes, checked.sha256) : source.kind === 'file' ? archive.adopt(source.file, checked.sha256, source.synced) : '';
      return { ...checked, archivePath };
    });
    try {
      await archive.flush();
    } catch (err) {
      await archive.discard();
      throw err;
    }
    const at = now();
    const byJob = new Map<number, number[]>();
    batch.forEach((item, i) => byJob.set(item.jobRef, [...(byJob.get(item.jobRef) ?? []), i]));
    const outcomes: (FileOutcome | undefined)[] = batch.map(() => undefined);
    // One transaction, one durable commit, for the batch; each job's instances go through
    // commitBatch in a savepoint of it, so each job counts its own files as with a lone batch.
    await s.db.transaction(async (tx) => {
      for (const [jobRef, members] of byJob) {
        const { outcomes: got } = await commitBatch(tx, s.replica, jobRef, members.map((i) => prepared[i]!), at);
        members.forEach((i, k) => (outcomes[i] = got[k]));
      }
    }, { durable: true, isolation: 'read committed' });
    return outcomes;
  };

  const pause = (millis: number): Promise<void> =>
    new Promise((resolve) => {
      const timer = setTimeout(resolve, millis);
      wakeRetry = () => {
        clearTimeout(timer);
        resolve();
      };
    });

  const drain = async (): Promise<void> => {
    while (queue.length > 0) {
      // Gathers a batch: per-batch work (a transaction, its durable commit, routing rules, the
      // job's counts) costs as much for one instance as for hundreds, and a sender waits on the
      // intake log, not on this. Cut short when a release or a stop is waiting for the index.
      if (queue.length < BATCH_ITEMS && backlogBytes < BACKLOG_BYTES / 2 && hurry === 0 && !stopping && !queue.some((i) => i.source.kind === 'file')) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, options.lingerMs);
          lingerWake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        lingerWake = undefined;
      }
      let bytes = 0;
      let n = 0;
      while (n < queue.length && n < BATCH_ITEMS && (n === 0 || bytes + sizeOf(queue[n]!) <= BATCH_BYTES)) bytes += sizeOf(queue[n++]!);
      const batch = queue.slice(0, n);
      queue = queue.slice(n);
      try {
        const outcomes = await indexBatch(batch);
        failures = 0;
        batch.forEach((item, i) => {
          took(item);
          // Indexed durably: the log no longer needs it.
          if (item.source.kind === 'bytes') item.source.record.release();
          item.resolve(outcomes[i]);
        });
      } catch (err) {
        failures += 1;
        s.log.error('dimse.index_failed', { instances: batch.length, attempt: failures, error: codeOf(err) ?? (err instanceof Error ? err.name : 'non-error') });
        // Not answered yet (a spooled file): answered now, the sender keeps it. Answered and in the
        // log: tried again after a pause, or at the next start should this process stop first.
        const again: Item[] = [];
        for (const item of batch) {
          if (item.source.kind === 'file') item.reject(err);
          else if (item.source.kind === 'bytes') again.push(item);
          else {
            took(item);
            item.resolve(undefined);
          }
        }
        queue = [...again, ...queue];
        for (const wake of [...roomWaiters]) wake();
        if (stopping) {
          for (const item of queue) item.resolve(undefined);
          queue = [];
          return;
        }
        await pause(RETRY_MS[Math.min(failures, RETRY_MS.length) - 1]!);
      }
    }
  };

  // Started again if an item came in while the last drain was ending (after its loop, before its finally).
  const kick = (): void => {
    if (indexing) return;
    indexing = drain().finally(() => {
      indexing = undefined;
      if (queue.length > 0 && !stopping) kick();
    });
  };

  const enqueue = (item: Omit<Item, 'resolve' | 'reject'>): Promise<FileOutcome | undefined> =>
    new Promise((resolve, reject) => {
      const full: Item = { ...item, resolve, reject };
      queue.push(full);
      backlogBytes += sizeOf(full);
      // An instance answered only once indexed (spooled) is not kept waiting for a batch to fill.
      if (queue.length >= BATCH_ITEMS || backlogBytes >= BACKLOG_BYTES / 2 || item.source.kind === 'file') lingerWake?.();
      kick();
    });

  /** Waits while the backlog is full; refuses while it is full and the indexer is failing. */
  const room = async (): Promise<void> => {
    while (backlogBytes > BACKLOG_BYTES) {
      if (failures > 0) throw Object.assign(new Error('storage is failing: instances received are waiting to be indexed'), { code: 'EIO' });
      await new Promise<void>((resolve) => {
        const wake = (): void => {
          roomWaiters.delete(wake);
          resolve();
        };
        roomWaiters.add(wake);
      });
    }
  };

  /** Durable in the intake log once the backlog has room; the record names its content by digest. */
  const appendRecord = async (bytes: Buffer, sha256: string, sender: CallerIdentity, receivedAt: string): Promise<Appended> => {
    await room();
    return await intake.append({ callingAeTitle: sender.callingAeTitle, host: sender.host, receivedAt }, bytes, sha256);
  };

  /**
   * Checks an instance and, if it is to be stored, makes it durable; resolves with its answer and
   * with what settles once it is indexed.
   */
  const receive = async (jobRef: number, path: string, input: ReceivedInstance, sender: CallerIdentity, receivedAt: string): Promise<{ answer: StoreOutcome; indexed: Promise<unknown> }> => {
    let bytes: Buffer;
    try {
      bytes = input.kind === 'bytes' ? input.bytes : readFileSync(input.file);
    } catch (err) {
      throw Object.assign(new Error('the spooled instance could not be read'), { code: codeOf(err) ?? 'EIO' });
    }
    // An instance received in memory is appended to the intake log as it is checked (a refused
    // one's record is released at once). Small appends are written in the event loop, so the disk's
    // wait does not overlap the parse; only a group over 1 MiB goes to the pool (intake-log.ts).
    // One digest for the record and the checks: hashing an instance twice was 3% of this thread.
    const sha256 = input.kind === 'bytes' ? createHash('sha256').update(bytes).digest('hex') : undefined;
    const appending = sha256 !== undefined ? appendRecord(bytes, sha256, sender, receivedAt) : undefined;
    let checked: Inspected;
    try {
      checked = await inspect(s.db, s.dataDir, path, bytes, sha256);
    } catch (err) {
      void appending?.then((record) => record.release(), () => undefined);
      throw err;
    }
    if (checked.kind === 'store') {
      const sop = checked.instance.sopInstanceUid;
      const waiting = unindexed.get(sop);
      if (waiting !== undefined) {
        // Answered moments ago and not indexed yet: the index cannot tell, this map can.
        const result: FileOutcome = waiting === checked.sha256
          ? { outcome: 'duplicate', path, sop_instance_uid: sop, scan_id: checked.instance.seriesInstanceUid, bytes: bytes.length }
          : { outcome: 'conflict', path, sop_instance_uid: sop, reason: `SOP Instance UID ${sop} is already stored with different content; kept the first`, bytes: bytes.length };
        checked = { kind: 'done', result };
      }
    }
    if (checked.kind === 'done') {
      void appending?.then((record) => record.release(), () => undefined);
      // Counted in the job with the next batch; the answer does not wait for that.
      return { answer: storeStatusOf(checked.result), indexed: enqueue({ jobRef, checked, source: { kind: 'none' } }) };
    }
    if (input.kind === 'file') {
      // Spooled: answered once indexed, as a file import is.
      const outcome = await enqueue({ jobRef, checked, source: { kind: 'file', file: input.file, synced: input.synced } });
      return { answer: outcome ? storeStatusOf(outcome) : { status: STATUS.outOfResources, errorComment: 'import produced no outcome' }, indexed: Promise.resolve() };
    }
    // In memory, so the append was started above.
    const record = await (appending ?? Promise.reject(new Error('no intake append for an instance in memory')));
    unindexed.set(checked.instance.sopInstanceUid, checked.sha256);
    return { answer: { status: STATUS.success }, indexed: enqueue({ jobRef, checked, source: { kind: 'bytes', bytes, record } }) };
  };

  const beginStop = (): void => {
    stopping = true;
    wakeRetry?.();
    lingerWake?.();
  };

  return {
    openSession(caller: CallerIdentity): Promise<StoreSession> {
      let job: ImportJobRow | undefined;
      let release: (() => void) | undefined;
      let files = 0;
      const indexed = new Set<Promise<unknown>>();
      const session: StoreSession = {
        async store(input) {
          try {
            if (!job) {
              job = await createImportJob(deps, 'upload', [`dicom:${caller.callingAeTitle}@${caller.host}`], `dicom:${caller.callingAeTitle}`);
              release = s.node.hold('import', job.id);
            }
            files += 1;
            const { answer, indexed: done } = await receive(job.id, `C-STORE ${files} from ${caller.callingAeTitle}`, input, caller, now());
            const settled = done.then(() => undefined, () => undefined);
            indexed.add(settled);
            void settled.then(() => indexed.delete(settled));
            return answer;
          } catch (err) {
            // A full or failing disk (or database): the sender may retry later or elsewhere.
            const storage = storageErrorOf(err);
            s.log.error('dimse.store_failed', { calling_ae: caller.callingAeTitle, error: codeOf(err) ?? (err instanceof Error ? err.name : 'non-error') });
            return { status: STATUS.outOfResources, errorComment: storage?.message ?? 'the instance could not be stored' };
          }
        },
        async settled() {
          hurry += 1;
          lingerWake?.();
          try {
            await Promise.all([...indexed]);
          } finally {
            hurry -= 1;
          }
        },
        async close(ending) {
          if (!job) return;
          try {
            await session.settled();
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
    async recover() {
      await removeAbandonedSpares(s.dataDir).catch((err: unknown) => s.log.error('dimse.intake_spares_not_removed', { error: codeOf(err) ?? (err instanceof Error ? err.name : 'non-error') }));
      const segments = await abandonedSegments(s.dataDir);
      if (segments.length === 0) return;
      const job = await createImportJob(deps, 'upload', ['dicom:intake-log'], 'dicom:recovered');
      const hold = s.node.hold('import', job.id);
      let files = 0;
      try {
        for (const segment of segments) {
          const pending: Promise<unknown>[] = [];
          const end = await readIntakeSegment(segment, async (record) => {
            files += 1;
            const path = `C-STORE from ${record.meta.callingAeTitle} at ${record.meta.receivedAt}, recovered`;
            // The record's digest was checked against its content as it was read.
            const checked = await inspect(s.db, s.dataDir, path, record.bytes, record.sha256);
            await room();
            // Already durable in the segment being read, which goes once all of it is indexed.
            pending.push(enqueue({ jobRef: job.id, checked, source: checked.kind === 'store' ? { kind: 'bytes', bytes: record.bytes, record: { release: () => undefined } } : { kind: 'none' } }));
          });
          const outcomes = await Promise.all(pending);
          if (end.tornBytes > 0) s.log.info('dimse.intake_torn_tail', { records: end.records, torn_bytes: end.tornBytes, why: end.why });
          if (outcomes.some((o) => o === undefined)) throw Object.assign(new Error('recovered instances could not be indexed'), { code: 'EIO' });
          await unlink(segment);
        }
        await setImportJobTotal(s.db, job.id, files, now());
        const row = await finishImportJob(s.db, job.id, 'completed', null, now());
        s.log.info('dimse.intake_recovered', { job_id: job.public_id, segments: segments.length, instances: files, imported: row?.imported ?? 0, duplicates: row?.duplicates ?? 0 });
      } catch (err) {
        s.log.error('dimse.intake_recovery_failed', { job_id: job.public_id, error: codeOf(err) ?? (err instanceof Error ? err.name : 'non-error') });
        await finishImportJob(s.db, job.id, 'interrupted', 'instances received before a restart could not all be indexed; they are kept for the next start', now()).catch(() => undefined);
      } finally {
        hold();
      }
    },
    stopping: beginStop,
    async stop() {
      beginStop();
      await indexing;
      await intake.close();
    },
  };
}
