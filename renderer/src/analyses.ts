/**
 * Analysis runs started from this window: POST /v1/scans/{id}/analyses, then the job followed
 * over its Server-Sent Events (GET /v1/analyses/{id}/events) until done, failed,
 * not_applicable or cancelled. Kept above the screens (in Shell) so a run started on the
 * worklist keeps its progress when the viewer opens, and the other way round.
 */
import { createContext, useCallback, useContext, useEffect, useMemo, useRef, useState } from 'react';
import type { Client } from './api/client.ts';
import type { AnalysisJob, AnalysisJobStatus } from './api/types.ts';
import { errorText } from './format.ts';

export type RunPhase = 'starting' | AnalysisJobStatus | 'error';

export type AnalysisRun = {
  scanId: string;
  jobId: string | null;
  phase: RunPhase;
  done: number;
  total: number | null;
  /** Why it failed or does not apply (from the server), or why the request itself failed. */
  reason: string | null;
  findings: number | null;
  model: string | null;
};

export type Analyses = {
  runs: ReadonlyMap<string, AnalysisRun>;
  /** Counts runs that ended, so lists know when to reload. */
  finished: number;
  start(scanId: string): void;
  cancel(scanId: string): void;
};

export const AnalysesContext = createContext<Analyses | null>(null);

export function useAnalyses(): Analyses {
  const analyses = useContext(AnalysesContext);
  if (!analyses) throw new Error('useAnalyses outside the Shell');
  return analyses;
}

export function isActive(run: AnalysisRun | undefined | null): boolean {
  return run !== undefined && run !== null && (run.phase === 'starting' || run.phase === 'queued' || run.phase === 'running');
}

const END_EVENTS = new Set(['done', 'failed', 'not_applicable', 'cancelled']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function parseData(data: string): unknown {
  try {
    return JSON.parse(data);
  } catch {
    return null;
  }
}

function isJob(value: unknown): value is AnalysisJob {
  return isRecord(value) && typeof value['id'] === 'string' && typeof value['status'] === 'string' && isRecord(value['progress']);
}

function fromJob(job: AnalysisJob): Omit<AnalysisRun, 'scanId'> {
  return {
    jobId: job.id,
    phase: job.status,
    done: job.progress.slices_done,
    total: job.progress.slices_total,
    reason: job.reason,
    findings: job.findings,
    model: `${job.model.name} v${job.model.version}`,
  };
}

const blank = (scanId: string): AnalysisRun => ({ scanId, jobId: null, phase: 'starting', done: 0, total: null, reason: null, findings: null, model: null });

export function useAnalysesTracker(client: Client): Analyses {
  const [runs, setRuns] = useState<ReadonlyMap<string, AnalysisRun>>(() => new Map());
  const [finished, setFinished] = useState(0);
  const controllers = useRef(new Map<string, AbortController>());
  const runsRef = useRef(runs);
  runsRef.current = runs;

  useEffect(() => {
    const live = controllers.current;
    return () => {
      for (const controller of live.values()) controller.abort();
    };
  }, []);

  const update = useCallback((scanId: string, patch: Partial<AnalysisRun>) => {
    setRuns((previous) => {
      const next = new Map(previous);
      next.set(scanId, { ...(previous.get(scanId) ?? blank(scanId)), ...patch });
      return next;
    });
  }, []);

  const follow = useCallback(
    async (scanId: string, jobId: string, signal: AbortSignal) => {
      let ended = false;
      await client.events(
        `/v1/analyses/${encodeURIComponent(jobId)}/events`,
        (event) => {
          const data = parseData(event.data);
          if (END_EVENTS.has(event.event) && isJob(data)) {
            ended = true;
            update(scanId, fromJob(data));
          } else if ((event.event === 'queued' || event.event === 'progress') && isRecord(data)) {
            update(scanId, {
              phase: data['status'] === 'queued' ? 'queued' : 'running',
              done: typeof data['slices_done'] === 'number' ? data['slices_done'] : 0,
              total: typeof data['slices_total'] === 'number' ? data['slices_total'] : null,
            });
          }
        },
        signal,
      );
      if (ended) return;
      // The stream closed without its end event (a proxy, a server restart): ask once.
      const job = await client.get<AnalysisJob>(`/v1/analyses/${encodeURIComponent(jobId)}`, { signal });
      update(scanId, fromJob(job));
      if (job.status === 'queued' || job.status === 'running') {
        update(scanId, { phase: 'error', reason: 'Lost the progress stream; the analysis continues on the server. Reload the worklist to see its result.' });
      }
    },
    [client, update],
  );

  const start = useCallback(
    (scanId: string) => {
      if (controllers.current.has(scanId)) return;
      const controller = new AbortController();
      controllers.current.set(scanId, controller);
      const { signal } = controller;
      setRuns((previous) => new Map(previous).set(scanId, blank(scanId)));
      void (async () => {
        try {
          const job = await client.post<AnalysisJob>(`/v1/scans/${encodeURIComponent(scanId)}/analyses`, { body: {}, signal });
          update(scanId, fromJob(job));
          if (job.status === 'queued' || job.status === 'running') await follow(scanId, job.id, signal);
        } catch (error) {
          if (!signal.aborted) update(scanId, { phase: 'error', reason: errorText(error) });
        } finally {
          controllers.current.delete(scanId);
          if (!signal.aborted) setFinished((n) => n + 1);
        }
      })();
    },
    [client, update, follow],
  );

  const cancel = useCallback(
    (scanId: string) => {
      const jobId = runsRef.current.get(scanId)?.jobId;
      if (!jobId) return;
      // The event stream then ends with `cancelled`; this reply only says so sooner.
      client.del<AnalysisJob>(`/v1/analyses/${encodeURIComponent(jobId)}`).then(
        (job) => update(scanId, fromJob(job)),
        (error: unknown) => update(scanId, { reason: `Could not cancel: ${errorText(error)}` }),
      );
    },
    [client, update],
  );

  return useMemo(() => ({ runs, finished, start, cancel }), [runs, finished, start, cancel]);
}
