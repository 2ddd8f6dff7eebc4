/**
 * `mia import PATH...`: one import job over files, folders and discs, run in this process on
 * the data folder (safe beside a running server: WAL, busy timeout, idempotent archive writes).
 * Re-running the same command after a crash resumes the interrupted job from its checkpoint.
 */
import { resolve } from 'node:path';
import { recordAudit } from '#server/audit/audit.ts';
import { systemClock } from '#server/clock.ts';
import { formatTable } from '#server/cli/table.ts';
import { MiaError } from '#server/errors.ts';
import { checkSources, claimAbandonedPathJob, createImportJob, runPathJob, type ImportDeps } from '#server/imports/import-job.ts';
import { openDataFolder } from '#server/data-folder.ts';
import { listImportRejects, type ImportJobRow } from '#server/store/import-jobs.ts';

export type ImportIo = { out(line: string): void; err(line: string): void; stderrIsTty: boolean; writeErr(text: string): void };

const MB = 1024 * 1024;
const SHOWN_REJECTS = 50;

function progressLine(job: ImportJobRow, startedAt: number): string {
  const total = job.files_total ?? 0;
  const seconds = Math.max((performance.now() - startedAt) / 1000, 0.001);
  return `${job.files_seen}/${total} files, ${(job.bytes / MB).toFixed(1)} MB, ${(job.files_seen / seconds).toFixed(0)} files/s` +
    ` (imported ${job.imported}, duplicates ${job.duplicates}, conflicts ${job.conflicts}, rejected ${job.rejected})`;
}

function bar(job: ImportJobRow, width = 30): string {
  const total = job.files_total ?? 0;
  const filled = total === 0 ? width : Math.round((job.files_seen / total) * width);
  return `[${'#'.repeat(filled)}${'.'.repeat(Math.max(0, width - filled))}]`;
}

export async function importCommand(
  paths: readonly string[],
  { dataDir, databaseUrl }: { dataDir: string; databaseUrl?: string | null },
  io: ImportIo,
): Promise<number> {
  if (paths.length === 0) throw new MiaError('invalid', 'import needs at least one PATH (file, folder or DICOMDIR)');
  const sources = paths.map((p) => resolve(p));
  await checkSources(sources);
  const folder = await openDataFolder(dataDir, { databaseUrl: databaseUrl ?? null });
  const { db, node } = folder;
  const deps: ImportDeps = { db, clock: systemClock, dataDir, node, replica: folder.replica };
  const controller = new AbortController();
  const stop = (): void => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    const resumed = await claimAbandonedPathJob(deps, sources);
    const job = resumed ?? await createImportJob(deps, 'path', sources, 'cli');
    if (resumed) io.err(`resuming import ${job.public_id} after ${job.checkpoint} files`);
    await recordAudit(db, {
      at: systemClock.now().toISOString(),
      request_id: null,
      key_id: 'cli',
      user_id: 'cli',
      action: resumed ? 'imports.resume' : 'imports.create',
      target: `import:${job.public_id}`,
      patient_id: null,
      outcome: 'success',
      status_code: null,
    });
    const startedAt = performance.now();
    let lastPlain = 0;
    const finalRow = await runPathJob(deps, job, {
      signal: controller.signal,
      onBatch: (row) => {
        if (io.stderrIsTty) {
          io.writeErr(`\r${bar(row)} ${progressLine(row, startedAt)}\x1b[K`);
        } else if (performance.now() - lastPlain > 2000 || row.files_seen === row.files_total) {
          lastPlain = performance.now();
          io.err(`import ${row.public_id}: ${progressLine(row, startedAt)}`);
        }
      },
    });
    if (io.stderrIsTty) io.writeErr('\n');
    if (finalRow.status === 'running') {
      io.err(`import ${finalRow.public_id} stopped after ${finalRow.files_seen} files; run the same command again to resume`);
      return 130;
    }
    const seconds = Math.max((performance.now() - startedAt) / 1000, 0.001);
    io.out(
      formatTable(
        ['JOB', 'STATUS', 'FILES', 'IMPORTED', 'DUPLICATES', 'CONFLICTS', 'REJECTED', 'MB', 'FILES/S'],
        [[
          finalRow.public_id,
          finalRow.status,
          String(finalRow.files_seen),
          String(finalRow.imported),
          String(finalRow.duplicates),
          String(finalRow.conflicts),
          String(finalRow.rejected),
          (finalRow.bytes / MB).toFixed(1),
          (finalRow.files_seen / seconds).toFixed(0),
        ]],
      ),
    );
    const rejects = await listImportRejects(db, finalRow.id, 0, SHOWN_REJECTS);
    if (rejects.length > 0) {
      io.out('');
      io.out(formatTable(['OUTCOME', 'FILE', 'REASON'], rejects.map((r) => [r.outcome, r.path, r.reason])));
      const more = finalRow.rejected + finalRow.conflicts - rejects.length;
      if (more > 0) io.out(`... and ${more} more (GET /v1/imports/${finalRow.public_id})`);
    }
    if (finalRow.status !== 'completed') {
      io.err(`import ${finalRow.status}: ${finalRow.error ?? ''}`);
      return 1;
    }
    return finalRow.rejected + finalRow.conflicts > 0 ? 1 : 0;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    await folder.close();
  }
}
