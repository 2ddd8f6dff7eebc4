/**
 * `mia analyze (--all | SCAN_ID...)`: analysis jobs run in this process on the data folder (safe
 * beside a running server: jobs are claimed atomically, and a job the server already runs is
 * waited for). Jobs a killed `mia analyze` or `mia serve` left running are queued again first,
 * so re-running the command resumes them. Progress on stderr, a summary table on stdout.
 */
import { isTerminal } from '#server/analysis/analysis-queue.ts';
import { recordAudit } from '#server/audit/audit.ts';
import { systemClock } from '#server/clock.ts';
import { formatTable } from '#server/cli/table.ts';
import type { ServerConfigInput } from '#server/config.ts';
import { MiaError } from '#server/errors.ts';
import { createRuntime } from '#server/runtime.ts';
import { findFindingsByAnalyses } from '#server/store/analyses.ts';
import { findActiveAnalysis, listScansToAnalyse, type AnalysisJobRow } from '#server/store/analysis-jobs.ts';
import { findScan } from '#server/store/scans.ts';

export type AnalyzeIo = { out(line: string): void; err(line: string): void; stderrIsTty: boolean; writeErr(text: string): void };

export type AnalyzeOptions = { all: boolean; scanIds: readonly string[]; modelId?: string | undefined; config?: Omit<ServerConfigInput, 'dataDir'> };

type Row = { job: AnalysisJobRow; seconds: number };

function bar(done: number, total: number, width = 30): string {
  const filled = total === 0 ? width : Math.min(width, Math.round((done / total) * width));
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

/** Scan UIDs are long; the table shows their end, which is what tells series of a study apart. */
function shortUid(uid: string): string {
  return uid.length > 28 ? `…${uid.slice(-27)}` : uid;
}

export async function analyzeCommand(dataDir: string, options: AnalyzeOptions, io: AnalyzeIo): Promise<number> {
  if (!options.all && options.scanIds.length === 0) throw new MiaError('invalid', 'analyze needs --all or at least one SCAN_ID');
  if (options.all && options.scanIds.length > 0) throw new MiaError('invalid', 'give either --all or SCAN_IDs, not both');
  // The runtime without background work: only the jobs named here run, in this process.
  const runtime = await createRuntime({ logToStderr: false, ...options.config, clock: systemClock, dataDir }, { background: false });
  const { db, analyses: queue } = runtime;
  const controller = new AbortController();
  const stop = (): void => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  try {
    await runtime.start();
    const targets = options.all ? (await listScansToAnalyse(db)).map((s) => s.scan_id) : [...options.scanIds];
    for (const id of targets) if (!await findScan(db, id)) throw new MiaError('not_found', 'Scan not found', `no scan with id ${id} (see GET /v1/scans)`);
    const jobs: AnalysisJobRow[] = [];
    for (const scanId of targets) {
      const scan = await findScan(db, scanId);
      const active = scan ? await findActiveAnalysis(db, scan.id) : undefined;
      const job = active ?? (await queue.enqueue(scanId, { modelId: options.modelId, requestedBy: 'cli' }));
      await recordAudit(db, {
        at: systemClock.now().toISOString(),
        request_id: null,
        key_id: 'cli',
        user_id: 'cli',
        action: active ? 'analyses.resume' : 'analyses.create',
        target: `analysis:${job.public_id}`,
        patient_id: job.patient_id,
        outcome: 'success',
        status_code: null,
      });
      jobs.push(job);
    }
    if (jobs.length === 0) {
      io.err('nothing to analyse: every scan is analysed or under review (name scans to analyse them again)');
      return 0;
    }

    let slicesDone = 0;
    let slicesCurrent = 0;
    let lastPlain = 0;
    const rows: Row[] = [];
    for (const [index, job] of jobs.entries()) {
      if (controller.signal.aborted) break;
      const startedAt = performance.now();
      const unsubscribe = queue.onProgress(job.id, ({ done, total }) => {
        slicesCurrent = done;
        const line = `scan ${index + 1}/${jobs.length}: ${done}/${total} slices (all scans: ${slicesDone + done} slices done)`;
        if (io.stderrIsTty) io.writeErr(`\r${bar(done, total)} ${line}\x1b[K`);
        else if (performance.now() - lastPlain > 2000 || done === total) {
          lastPlain = performance.now();
          io.err(`analyze: ${line}`);
        }
      });
      try {
        const final = await queue.runJob(job.id, controller.signal);
        rows.push({ job: final, seconds: (performance.now() - startedAt) / 1000 });
      } finally {
        unsubscribe();
        slicesDone += slicesCurrent;
        slicesCurrent = 0;
      }
    }
    if (io.stderrIsTty) io.writeErr('\n');

    const findings = await findFindingsByAnalyses(db, rows.filter((r) => r.job.status === 'succeeded').map((r) => r.job.id));
    io.out(
      formatTable(
        ['SCAN', 'MODALITY', 'SLICES', 'STATUS', 'TOP FINDING', 'SECONDS'],
        rows.map(({ job, seconds }) => {
          const top = findings.get(job.id)?.[0];
          const status = job.status === 'not_applicable' || job.status === 'failed' ? `${job.status}: ${job.error ?? ''}` : job.status;
          return [
            shortUid(job.scan_id),
            job.modality,
            String(job.slices_total ?? '-'),
            status.length > 70 ? `${status.slice(0, 69)}…` : status,
            top ? `${top.label} ${top.confidence.toFixed(2)}` : job.status === 'succeeded' ? 'none' : '-',
            seconds.toFixed(1),
          ];
        }),
      ),
    );
    if (controller.signal.aborted || rows.some((r) => !isTerminal(r.job.status))) {
      io.err('analyze stopped; run the same command again to resume');
      return 130;
    }
    return rows.some((r) => r.job.status === 'failed') ? 1 : 0;
  } finally {
    process.off('SIGINT', stop);
    process.off('SIGTERM', stop);
    await runtime.stop();
  }
}
