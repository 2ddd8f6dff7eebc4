/**
 * Analysis jobs: persisted in the analyses table, run with bounded concurrency, resumable.
 *
 * A scan goes queued -> analyzing -> analyzed | failed (state-machine.ts). A job belongs to the
 * node running it (server/jobs: its owner node and heartbeat); one left running by a node that
 * died is queued again by the next mia that looks (at start, and on every poll of a running
 * server, on any node of a hub), so a `kill -9` loses only the batch in flight. Every write that
 * ends a job is conditional on the job still being this node's, so a cancel from another process
 * or a takeover can never let two writers finish one job.
 */
import { routeEvent } from '#server/routing/rules.ts';
import { runAnalysis, type EngineHooks, type EngineSlice } from '#server/analysis/engine.ts';
import { siteDecision } from '#server/analysis/operating-points.ts';
import { listInstalledModels, readyModel, selectedModelId, triageLabelsOf, type ReadyModel } from '#server/analysis/registry.ts';
import { SessionCache } from '#server/analysis/session-cache.ts';
import { join } from 'node:path';
import { MiaError, conflict, notFound } from '#server/errors.ts';
import { analysisChange } from '#server/sync/entities.ts';
import { recordChanges } from '#server/sync/replica.ts';
import { analysisFailed, analysisInterrupted, analysisQueued, analysisStarted, analysisSucceeded, analysisWithdrawn, queueRequestUnmet } from '#server/scans/lifecycle.ts';
import type { Services } from '#server/services.ts';
import {
  completeAnalysis,
  findActiveAnalysis,
  findAnalysisJob,
  findAnalysisJobById,
  finishAnalysis,
  insertQueuedAnalysis,
  listNeverAnalysedScans,
  listRunningAnalyses,
  requeueAnalysis,
  setAnalysisModel,
  setAnalysisProgress,
  type AnalysisJobRow,
} from '#server/store/analysis-jobs.ts';
import { claimAnalysis, claimNextAnalysis, isAbandoned, ownerOf, type SeenOwner } from '#server/jobs/jobs.ts';
import { inTransaction, type Database } from '#server/store/database.ts';
import { listRunningImportJobs } from '#server/store/import-jobs.ts';
import { listScanSliceSources } from '#server/store/instances.ts';
import { findScan } from '#server/store/scans.ts';

export type QueueOptions = {
  /** A server runs queued jobs by itself; the CLI runs the ones it names (runJob). */
  autoRun: boolean;
  /** How often a server looks for work queued by other processes and for dead owners. */
  pollMs?: number;
};

export type JobProgress = { done: number; total: number };

const DEFAULT_POLL_MS = 2000;
const WAIT_POLL_MS = 200;
/** How often a command waiting on another process's job checks that the process still lives. */
const ABANDONED_LOOK_MS = 2_000;
/**
 * A running job's progress is written (an UPDATE, and on a hub a NOTIFY every node hears) after
 * its first batch, then at most this often, and after its last. Per batch, a 100-slice job
 * wrote 13 times, ~2 ms of the thread that feeds inference. A cancel from another process is
 * still seen within this (one on this node stops the job at its next batch).
 */
const PROGRESS_EVERY_MS = 100;
const MAX_REASON = 500;
/**
 * A job whose process died under it this often is failed, not resumed: a file that takes the
 * process down would otherwise take it down again at every start. Clean stops do not count.
 */
export const MAX_INTERRUPTIONS = 2;
/** Frames one analysis reads; frame counts come from files, so they are bounded here too. */
export const MAX_ANALYSIS_SLICES = 20_000;

function reasonOf(err: unknown): string {
  if (err instanceof MiaError) return (err.details ? `${err.message} (${err.details})` : err.message).slice(0, MAX_REASON);
  if (err instanceof Error) return `analysis failed: ${err.message}`.slice(0, MAX_REASON);
  return 'analysis failed';
}

export const TERMINAL = ['succeeded', 'failed', 'not_applicable', 'cancelled'] as const;
export const isTerminal = (status: string): boolean => (TERMINAL as readonly string[]).includes(status);

export class AnalysisQueue {
  readonly #services: Services;
  readonly #options: QueueOptions;
  readonly sessions: SessionCache;
  /** Jobs this process runs, by row id, with the controller that stops them. */
  readonly #running = new Map<number, AbortController>();
  readonly #tasks = new Set<Promise<void>>();
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(services: Services, options: QueueOptions) {
    this.#services = services;
    this.#options = options;
    this.sessions = new SessionCache({ intraOpThreads: services.config.intraOpThreads, interOpThreads: services.config.interOpThreads });
  }

  #now(): string {
    return this.#services.clock.now().toISOString();
  }

  /** Re-queues jobs whose process died; a server then starts working through the queue. */
  async start(): Promise<void> {
    await this.requeueAbandoned();
    if (!this.#options.autoRun) return;
    await this.pump();
    this.#timer = setInterval(() => void this.#poll(), this.#options.pollMs ?? DEFAULT_POLL_MS);
    this.#timer.unref();
  }

  async #poll(): Promise<void> {
    try {
      await this.requeueAbandoned();
      if (this.#services.config.analyzeAfterImport) void this.#queueImported().catch(() => undefined);
      await this.pump();
    } catch (err) {
      this.#services.log.error('analysis.poll_failed', { error: err instanceof Error ? err.name : 'non-error' });
    }
  }

  /** Scans imported and never analysed, once no import is still adding to them. */
  async #queueImported(): Promise<void> {
    const db = this.#services.db;
    if ((await listRunningImportJobs(db)).length > 0) return;
    for (const scan of await listNeverAnalysedScans(db)) {
      if (this.#stopped) return;
      try {
        await this.enqueue(scan.scan_id, { requestedBy: 'auto' });
      } catch (err) {
        this.#services.log.error('analysis.auto_queue_failed', { error: err instanceof MiaError ? err.message : 'error' });
        return;
      }
    }
  }

  async requeueAbandoned(): Promise<number> {
    const db = this.#services.db;
    let count = 0;
    const nowMs = this.#services.clock.now().getTime();
    for (const job of await listRunningAnalyses(db)) {
      if (!(await isAbandoned(db, this.#services.node, 'analysis', job, nowMs))) continue;
      const owner: SeenOwner = { node: job.owner_node, pid: job.owner_pid };
      // Clean stops requeue their own jobs; a running row found here lost its process.
      const died = owner.node !== null || owner.pid !== null;
      if (died && job.interruptions + 1 >= MAX_INTERRUPTIONS) {
        const reason = `the process analysing this scan stopped unexpectedly ${job.interruptions + 1} times; not resumed again (analyse it again to retry)`;
        const failed = await inTransaction(db, async (tx) => {
          if (!await finishAnalysis(tx, job.id, { status: 'running', owner }, 'failed', reason, this.#now())) return false;
          const row = await findAnalysisJobById(tx, job.id);
          if (row) await analysisFailed(tx, { ref: row.scan_ref, status: row.scan_status }, reason, this.#now());
          return true;
        });
        if (failed) this.#services.log.error('analysis.given_up', { job_id: job.public_id, interruptions: job.interruptions + 1 });
        continue;
      }
      const requeued = await inTransaction(db, async (tx) => {
        if (!await requeueAnalysis(tx, job.id, owner, this.#now(), died)) return false;
        await analysisInterrupted(tx, { ref: job.scan_ref, status: job.scan_status }, 'resumed after an interrupted analysis', this.#now());
        return true;
      });
      if (requeued) {
        count += 1;
        this.#services.log.info('analysis.requeued', { job_id: job.public_id });
      }
    }
    return count;
  }

  /** Queues an analysis of the scan with the selected model (or `modelId`). */
  async enqueue(scanId: string, options: { modelId?: string | undefined; requestedBy: string | null }): Promise<AnalysisJobRow> {
    const { db, config } = this.#services;
    const models = await listInstalledModels(config);
    const model = readyModel(models, options.modelId ?? await selectedModelId(db, config, models));
    const job = await inTransaction(db, async (tx) => {
      const scan = await findScan(tx, scanId);
      if (!scan) throw notFound('Scan', scanId);
      const active = await findActiveAnalysis(tx, scan.id);
      if (active) throw conflict(`This scan already has an analysis ${active.status}`, `analysis ${active.public_id}; cancel it first (DELETE /v1/analyses/${active.public_id})`);
      // Checked before the job is written: a scan that cannot be analysed gets no job row.
      // (`queued` already: a client requested it through POST /v1/scans/{scan_id}.)
      await analysisQueued(tx, { ref: scan.id, status: scan.status }, this.#now());
      const row = await insertQueuedAnalysis(tx, {
        scanRef: scan.id,
        model: modelRecord(model),
        decision: await siteDecision(tx, model),
        triageLabels: triageLabelsOf(model.manifest),
        requestedBy: options.requestedBy,
        at: this.#now(),
      });
      return row;
    });
    this.#services.log.info('analysis.queued', { job_id: job.public_id, model_id: job.model_id });
    // Started on the next turn, so the caller answers with the job as queued.
    if (this.#options.autoRun) setImmediate(() => void this.pump());
    return await findAnalysisJobById(db, job.id) ?? job;
  }

  /**
   * A client set the scan's status to queued (POST /v1/scans/{scan_id}): queue the job that
   * status promises. When no model can take it, the scan fails with the reason rather than
   * waiting in `queued` for ever.
   */
  async enqueueRequested(scanId: string, requestedBy: string | null): Promise<void> {
    try {
      await this.enqueue(scanId, { requestedBy });
    } catch (err) {
      if (!(err instanceof MiaError) || err.kind === 'not_found') throw err;
      const db = this.#services.db;
      const reason = reasonOf(err);
      await inTransaction(db, async (tx) => {
        const scan = await findScan(tx, scanId);
        if (scan && !await findActiveAnalysis(tx, scan.id)) await queueRequestUnmet(tx, { ref: scan.id, status: scan.status }, reason, this.#now());
      });
    }
  }

  /**
   * Cancels a queued or running job (here or in another process); the scan goes back to where
   * it was. A finished job is returned unchanged: cancelling is idempotent.
   */
  async cancel(publicId: string): Promise<AnalysisJobRow> {
    const db = this.#services.db;
    const job = await inTransaction(db, async (tx) => {
      const row = await findAnalysisJob(tx, publicId);
      if (!row) throw notFound('Analysis', publicId);
      if (isTerminal(row.status)) return row;
      const from = row.status === 'queued' ? { status: 'queued' as const } : { status: 'running' as const, owner: { node: row.owner_node, pid: row.owner_pid } };
      if (!await finishAnalysis(tx, row.id, from, 'cancelled', 'cancelled on request', this.#now())) return row;
      await this.#restoreScan(tx, row, 'analysis cancelled');
      return row;
    });
    this.#running.get(job.id)?.abort();
    return await findAnalysisJobById(db, job.id) ?? job;
  }

  /** After a cancel or a not-applicable result: received, or analyzed when a result stands. */
  async #restoreScan(db: Database, job: AnalysisJobRow, reason: string): Promise<void> {
    const scan = await findAnalysisJobById(db, job.id) ?? job;
    await analysisWithdrawn(db, { ref: scan.scan_ref, status: scan.scan_status, hasResult: scan.latest_analysis_ref !== null }, reason, this.#now());
  }

  /** Starts queued jobs up to the concurrency bound. */
  async pump(): Promise<void> {
    if (this.#stopped || !this.#options.autoRun) return;
    const limit = this.#services.config.analysisConcurrency;
    if (this.#running.size >= limit) return;
    while (this.#running.size < limit && !this.#stopped) {
      const claimed = await claimNextAnalysis(this.#services.db, this.#services.node, this.#now());
      if (!claimed) break;
      // #track never rejects: it records failures on the job and in the log.
      void this.#track(claimed);
    }
  }

  #track(job: AnalysisJobRow): Promise<void> {
    const controller = new AbortController();
    this.#running.set(job.id, controller);
    const release = this.#services.node.hold('analysis', job.id);
    const task = this.#run(job, controller.signal)
      .catch((err: unknown) => {
        this.#services.log.error('analysis.task_failed', { job_id: job.public_id, error: err instanceof Error ? err.name : 'non-error' });
      })
      .finally(() => {
        this.#running.delete(job.id);
        release();
        this.#tasks.delete(task);
        this.pump().catch((err: unknown) => {
          this.#services.log.error('analysis.pump_failed', { error: err instanceof Error ? err.name : 'non-error' });
        });
      });
    this.#tasks.add(task);
    return task;
  }

  /** Follow a job's progress as its runner reports it, on this node or another of a hub. */
  onProgress(jobId: number, listener: (p: JobProgress) => void): () => void {
    return this.#services.progress.subscribe('analysis', jobId, ({ done, total }) => listener({ done, total: total ?? done }));
  }

  /**
   * Runs one job now in this process (the CLI) if it is queued; if another process holds it,
   * waits for it to end. Resolves with the final row.
   */
  async runJob(jobId: number, signal?: AbortSignal): Promise<AnalysisJobRow> {
    const db = this.#services.db;
    const claimed = await claimAnalysis(db, this.#services.node, jobId, this.#now());
    if (claimed) {
      const onAbort = (): void => this.#running.get(jobId)?.abort();
      signal?.addEventListener('abort', onAbort, { once: true });
      try {
        await this.#track(claimed);
      } finally {
        signal?.removeEventListener('abort', onAbort);
      }
    }
    let lookedForTheDead = performance.now();
    for (;;) {
      const row = await findAnalysisJobById(db, jobId);
      if (!row) throw notFound('Analysis', String(jobId));
      if (isTerminal(row.status) || signal?.aborted || this.#stopped) return row;
      // Running in another process, or released back to the queue by a stop.
      if (row.status === 'queued' && !this.#stopped) return this.runJob(jobId, signal);
      // The process running it may die meanwhile (a server killed): its job goes back to the
      // queue, as a server's poll would do, and this process runs it. Without this the command
      // waited for good when no server was left to notice.
      if (performance.now() - lookedForTheDead >= ABANDONED_LOOK_MS) {
        lookedForTheDead = performance.now();
        await this.requeueAbandoned();
        continue;
      }
      await new Promise((resolve) => setTimeout(resolve, WAIT_POLL_MS));
    }
  }

  async #run(job: AnalysisJobRow, signal: AbortSignal): Promise<void> {
    const db = this.#services.db;
    const owner = ownerOf(this.#services.node);
    const started = performance.now();
    // queued -> analyzing; a scan archived meanwhile is not analysed.
    const moved = await inTransaction(db, async (tx) => {
      const row = await findAnalysisJobById(tx, job.id);
      if (!row || row.status !== 'running' || row.owner_node !== owner.node) return false;
      if (await analysisStarted(tx, { ref: row.scan_ref, status: row.scan_status }, this.#now())) return true;
      await finishAnalysis(tx, job.id, { status: 'running', owner }, 'cancelled', `scan status changed to ${row.scan_status}`, this.#now());
      return false;
    });
    if (!moved) return;

    let model: ReadyModel;
    let outcome;
    try {
      const models = await listInstalledModels(this.#services.config);
      model = readyModel(models, job.model_id);
      // Decided again at the start: the admin may have chosen another point since it was queued.
      const decision = await siteDecision(db, model);
      await setAnalysisModel(db, job.id, owner, modelRecord(model), { decision, triageLabels: triageLabelsOf(model.manifest) });
      const session = await this.sessions.get(model).catch((err: unknown) => {
        throw new MiaError('internal', `model ${model.id} does not load in onnxruntime`, err instanceof Error ? err.message : undefined);
      });
      const rows = await listScanSliceSources(db, job.scan_ref);
      const slices = rows.reduce((n, r) => n + Math.max(1, r.frames), 0);
      if (slices > MAX_ANALYSIS_SLICES) {
        throw new MiaError('unprocessable', `scan has ${slices} frames, more than the ${MAX_ANALYSIS_SLICES} one analysis reads`);
      }
      const sliceList: EngineSlice[] = rows.flatMap((r) =>
        Array.from({ length: Math.max(1, r.frames) }, (_, frame) => ({ instanceUid: r.sop_instance_uid, frame, path: join(this.#services.dataDir, r.file_path) })),
      );
      let progressAt = -Infinity;
      const engineHooks: EngineHooks = {
        signal,
        onProgress: async (done, total) => {
          const now = performance.now();
          if (done < total && now - progressAt < PROGRESS_EVERY_MS) return !signal.aborted;
          progressAt = now;
          const ok = await setAnalysisProgress(db, job.id, owner, done, total, this.#now());
          if (ok) this.#services.progress.publish({ kind: 'analysis', id: job.id, done, total });
          return ok && !signal.aborted;
        },
      };
      outcome = await runAnalysis(
        session,
        model.manifest,
        { modality: job.modality, bodyPart: job.body_part, slices: sliceList.length, instances: rows, sliceList },
        { batchSize: this.#services.config.analysisBatchSize, thresholds: decision.thresholds },
        engineHooks,
      );
    } catch (err) {
      const reason = reasonOf(err);
      await inTransaction(db, async (tx) => {
        if (await finishAnalysis(tx, job.id, { status: 'running', owner }, 'failed', reason, this.#now())) {
          const row = await findAnalysisJobById(tx, job.id);
          if (row) await analysisFailed(tx, { ref: row.scan_ref, status: row.scan_status }, reason, this.#now());
        }
      });
      this.#services.log.info('analysis.failed', { job_id: job.public_id, ms: Math.round(performance.now() - started) });
      return;
    }

    const at = this.#now();
    if (outcome.kind === 'stopped') {
      // Cancelled (the row says so already) or this process is stopping: back to the queue.
      await inTransaction(db, async (tx) => {
        if (await requeueAnalysis(tx, job.id, owner, at)) {
          const row = await findAnalysisJobById(tx, job.id);
          if (row) await analysisInterrupted(tx, { ref: row.scan_ref, status: row.scan_status }, 'resumes when mia next runs', at);
        }
      });
      return;
    }
    if (outcome.kind === 'not_applicable') {
      const reason = `not analysed by ${model.manifest.name}: ${outcome.reason}`;
      await inTransaction(db, async (tx) => {
        if (await finishAnalysis(tx, job.id, { status: 'running', owner }, 'not_applicable', outcome.reason, at)) await this.#restoreScan(tx, job, reason);
      });
      this.#services.log.info('analysis.not_applicable', { job_id: job.public_id });
      return;
    }
    await inTransaction(db, async (tx) => {
      if (!await completeAnalysis(tx, { id: job.id, scanRef: job.scan_ref, owner }, { recommendation: outcome.recommendation, findings: outcome.findings, at })) return;
      const change = await analysisChange(tx, job.id, job.requested_by);
      if (change) await recordChanges(tx, this.#services.replica, [change]);
      const row = await findAnalysisJobById(tx, job.id);
      if (row) await analysisSucceeded(tx, { ref: row.scan_ref, status: row.scan_status }, at);
      // Committed with the result, so a crash cannot finish an analysis and lose its sends.
      await routeEvent(tx, { event: 'analysis.finished', analysisRef: job.id }, at);
    });
    this.#services.log.info('analysis.succeeded', {
      job_id: job.public_id,
      model_id: model.id,
      slices: outcome.slices,
      findings: outcome.findings.length,
      ms: Math.round(performance.now() - started),
      inference_ms: Math.round(outcome.timings.inferenceMs),
    });
  }

  /** Stops running jobs at their next batch (they go back to the queue) and frees sessions. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    for (const controller of this.#running.values()) controller.abort();
    while (this.#tasks.size > 0) await Promise.all([...this.#tasks]);
    await this.sessions.close();
  }
}

function modelRecord(model: ReadyModel): { id: string; name: string; version: string; sha256: string } {
  return { id: model.id, name: model.manifest.name, version: model.manifest.version, sha256: model.manifest.file.sha256 };
}
