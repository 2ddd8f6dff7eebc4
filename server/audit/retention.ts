/**
 * Audit retention (issue 10): events older than auditRetentionDays move from the database to
 * archive files (archive.ts), at start and then hourly, batch by batch. Audit trails are kept
 * for years, so nothing here deletes an event that is not in a file already on disk: each batch
 * writes and fsyncs its file first, then records it and deletes its events in one transaction.
 */
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { ARCHIVE_FOLDER_ENTRY, AUDIT_ARCHIVE_DIR, parseArchive, sidecarName, writeAuditArchive } from '#server/audit/archive.ts';
import type { Clock } from '#server/clock.ts';
import type { Logger } from '#server/log.ts';
import { auditArchivableUpTo } from '#server/sync/audit-sync.ts';
import { isLinked } from '#server/sync/hub-link.ts';
import {
  auditArchiveRecorded,
  deleteAuditEvents,
  expiredAuditEvents,
  insertAuditArchive,
  liveAuditIds,
  type AuditArchiveRecord,
} from '#server/store/audit.ts';
import { inTransaction, type Database } from '#server/store/database.ts';
import { runExclusive } from '#server/store/exclusive.ts';

/** Events per file: bounds the memory of a batch and of reading one file back. */
export const ARCHIVE_BATCH_EVENTS = 10_000;

const RUN_EVERY_MS = 60 * 60 * 1000;
const DAY_MS = 24 * 60 * 60 * 1000;

export type RetentionDeps = { db: Database; clock: Clock; dataDir: string; retentionDays: number };

/** Events recorded before this instant are archived: whole UTC days, so a day's events share a file. */
export function retentionCutoff(now: Date, retentionDays: number): string {
  return new Date(Math.floor((now.getTime() - retentionDays * DAY_MS) / DAY_MS) * DAY_MS).toISOString();
}

/** Moves the oldest batch of events recorded before `cutoff` to a file; null when none is left. */
export async function archiveAuditBatch(deps: RetentionDeps, cutoff: string): Promise<AuditArchiveRecord | null> {
  const dir = join(deps.dataDir, AUDIT_ARCHIVE_DIR);
  // IMMEDIATE: no event of the batch can change (a counted refusal) between read and delete.
  return await inTransaction(deps.db, async (tx) => {
    // A workstation keeps what has not reached its hub yet: archived here, it would be a gap there.
    const upTo = await auditArchivableUpTo(tx, isLinked(deps.dataDir));
    const rows = await expiredAuditEvents(tx, cutoff, ARCHIVE_BATCH_EVENTS, upTo);
    if (rows.length === 0) return null;
    const record = writeAuditArchive(dir, rows, deps.clock.now().toISOString());
    await insertAuditArchive(tx, record);
    await deleteAuditEvents(tx, rows.map((row) => row.id));
    return record;
  });
}

/**
 * Files a batch wrote before its transaction failed to commit (a crash, a full disk): their
 * events are all still in the database, and the next batch writes them again. A file whose
 * events are not all live is not such a leftover (a database restored from an old backup, a
 * file copied in): it stays, and is named in the result.
 */
export async function removeUnrecordedArchives(db: Database, dataDir: string): Promise<{ removed: string[]; kept: string[] }> {
  const dir = join(dataDir, AUDIT_ARCHIVE_DIR);
  const removed: string[] = [];
  const kept: string[] = [];
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return { removed, kept };
  }
  for (const name of names) {
    // Other files in the folder are not ours to judge.
    if (!ARCHIVE_FOLDER_ENTRY.test(name)) continue;
    if (name.endsWith('.tmp')) {
      rmSync(join(dir, name), { force: true });
      continue;
    }
    if (name.endsWith('.json')) {
      // A sidecar holds no events; one without its archive file, for a batch never recorded,
      // would only stop the batch that writes that file again.
      const file = name.replace(/\.json$/, '.jsonl.gz');
      if (!names.includes(file) && !await auditArchiveRecorded(db, file)) rmSync(join(dir, name), { force: true });
      continue;
    }
    if (await auditArchiveRecorded(db, name)) continue;
    let ids: number[];
    try {
      ids = parseArchive(name, readFileSync(join(dir, name))).map((row) => row.id);
    } catch {
      kept.push(name);
      continue;
    }
    if ((await liveAuditIds(db, ids)).length !== ids.length) {
      kept.push(name);
      continue;
    }
    rmSync(join(dir, name), { force: true });
    rmSync(join(dir, sidecarName(name)), { force: true });
    removed.push(name);
  }
  return { removed, kept };
}

/** The name of retention among work one process at a time does (server/store/exclusive.ts). */
const RETENTION_TASK = 'audit-retention';

/** One whole run: every batch due now; [] when another node of a hub is running it. */
export async function archiveExpiredAudit(deps: RetentionDeps): Promise<AuditArchiveRecord[]> {
  const written = await runExclusive(deps.db, RETENTION_TASK, async () => {
    await removeUnrecordedArchives(deps.db, deps.dataDir);
    const cutoff = retentionCutoff(deps.clock.now(), deps.retentionDays);
    const records: AuditArchiveRecord[] = [];
    for (let record = await archiveAuditBatch(deps, cutoff); record; record = await archiveAuditBatch(deps, cutoff)) records.push(record);
    return records;
  });
  return written ?? [];
}

export type AuditRetention = { stop(): Promise<void> };

/**
 * Runs retention now and every hour until stopped. Between batches other work runs, so a
 * first start over years of events does not hold the server. Failures (a full disk) are
 * logged and leave the events where they were; the next run tries again.
 */
export function startAuditRetention(deps: RetentionDeps & { log: Logger }): AuditRetention {
  let stopped = false;
  let running: Promise<void> = Promise.resolve();

  // One node of a hub at a time: another's unrecorded file may be a batch it is committing.
  const run = async (): Promise<void> => {
    await runExclusive(deps.db, RETENTION_TASK, async () => {
      const { kept } = await removeUnrecordedArchives(deps.db, deps.dataDir);
      for (const file of kept) deps.log.error('audit.archive_unrecorded', { file });
      const cutoff = retentionCutoff(deps.clock.now(), deps.retentionDays);
      while (!stopped) {
        const record = await archiveAuditBatch(deps, cutoff);
        if (!record) return;
        deps.log.info('audit.archived', { file: record.file, events: record.rows, first_id: record.first_id, last_id: record.last_id });
        await nextTurn();
      }
    });
  };

  const schedule = (): void => {
    if (stopped) return;
    running = running
      .then(run)
      .catch((error: unknown) => {
        // The code only (ENOSPC, SQLITE_FULL): messages of fs errors carry paths.
        const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : error instanceof Error ? error.name : 'non-error';
        deps.log.error('audit.retention_failed', { error: code });
      });
  };

  schedule();
  const timer = setInterval(schedule, RUN_EVERY_MS);
  timer.unref();
  return {
    async stop() {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
