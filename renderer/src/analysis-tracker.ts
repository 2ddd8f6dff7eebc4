/**
 * Follows every analysis started from this window with one mechanism: requests are sent one at
 * a time (POST /v1/scans/{id}/analyses), and one poller asks GET /v1/analyses/{id} about a few
 * jobs a second, one request after the other. "Analyse 40 not analysed" therefore holds at most
 * two connections (one POST, one GET) instead of one Server-Sent Events stream per scan, which
 * used up the browser's six connections per origin and left the viewer's frames waiting.
 *
 * "Analyse 100,000 not analysed" (after a large import) must not freeze the window: the runs are
 * kept in one map changed in place, and listeners are told at most every `notifyMs` (the first
 * change at once), each time with one copy of the map, instead of a copy and a notification per
 * change (100,000 starts copied 100,000 entries 100,000 times).
 *
 * Plain TypeScript with no React, so the connection budget is unit-tested with a fake client.
 */
import { ApiError, type Client } from './api/client.ts';
import type { AnalysisJob, AnalysisJobStatus } from './api/types.ts';

export type RunPhase = 'starting' | AnalysisJobStatus | 'error';

export type AnalysisRun = {
  scanId: string;
  jobId: string | null;
  phase: RunPhase;
  done: number;
  total: number | null;
  /** Why it failed or does not apply (from the server), or why the request itself failed. */
  reason: string | null;
  /** HTTP status of a refused request (409: the scan's state does not allow analysis). */
  refusedWith: number | null;
  findings: number | null;
  model: string | null;
};

export type TrackerSnapshot = {
  runs: ReadonlyMap<string, AnalysisRun>;
  /** Counts runs that ended, so lists know when to reload. */
  finished: number;
};

export type AnalysisTracker = {
  start(scanId: string): void;
  cancel(scanId: string): void;
  subscribe(listener: () => void): () => void;
  snapshot(): TrackerSnapshot;
  /** Stops polling and aborts requests (the window signed out or unmounted). */
  dispose(): void;
  /** Undoes dispose: polling picks up the runs still active (React remounts in development). */
  resume(): void;
};

export type TrackerOptions = {
  /** Pause between polling rounds. */
  pollMs?: number;
  /** Jobs asked about per round, besides the running ones. */
  queuedPerRound?: number;
  /** Listeners hear of changes at most this often (the first change of a quiet spell at once). */
  notifyMs?: number;
};

export function isActive(run: AnalysisRun | undefined | null): boolean {
  return run !== undefined && run !== null && (run.phase === 'starting' || run.phase === 'queued' || run.phase === 'running');
}

function blank(scanId: string): AnalysisRun {
  return { scanId, jobId: null, phase: 'starting', done: 0, total: null, reason: null, refusedWith: null, findings: null, model: null };
}

function fromJob(job: AnalysisJob): Partial<AnalysisRun> {
  return {
    jobId: job.id,
    phase: job.status,
    done: job.progress.slices_done,
    total: job.progress.slices_total,
    reason: job.reason,
    refusedWith: null,
    findings: job.findings,
    model: `${job.model.name} v${job.model.version}`,
  };
}

/** A refusal keeps the server's own words, its details and the request id; a 409 (the scan's
 * state does not allow analysis, e.g. reported) reads without the bare "Conflict" title. */
function refusal(error: unknown): Partial<AnalysisRun> {
  if (error instanceof ApiError) {
    const { status, message, details, requestId } = error.info;
    const reason = status === 409 ? `${message}${details ? ` (${details})` : ''}${requestId ? ` [request ${requestId}]` : ''}` : error.message;
    return { phase: 'error', reason, refusedWith: status };
  }
  return { phase: 'error', reason: error instanceof Error ? error.message : String(error), refusedWith: null };
}

function isAbort(error: unknown): boolean {
  return error instanceof DOMException && error.name === 'AbortError';
}

export function createAnalysisTracker(client: Pick<Client, 'get' | 'post' | 'del'>, options: TrackerOptions = {}): AnalysisTracker {
  const pollMs = options.pollMs ?? 1000;
  const queuedPerRound = options.queuedPerRound ?? 2;
  const notifyMs = options.notifyMs ?? 100;
  const runs = new Map<string, AnalysisRun>();
  let finished = 0;
  /** What snapshot() gives until the next change: a copy, so a reader never sees it move. */
  let published: TrackerSnapshot = { runs: new Map(), finished: 0 };
  let changed = false;
  const listeners = new Set<() => void>();
  /** Active scans in the order they were started: the server's queue is first in, first out. */
  const order = new Set<string>();
  /** Scans whose request is still to be sent, from `nextToSubmit` on. */
  let toSubmit: string[] = [];
  let nextToSubmit = 0;
  let submitting = false;
  let polling = false;
  let timer: ReturnType<typeof setTimeout> | null = null;
  let notifyTimer: ReturnType<typeof setTimeout> | null = null;
  let notifiedAt = -Infinity;
  let controller = new AbortController();
  let rotation = 0;

  const notify = (): void => {
    notifyTimer = null;
    notifiedAt = performance.now();
    for (const listener of listeners) listener();
  };

  const update = (scanId: string, patch: Partial<AnalysisRun>): void => {
    const before = runs.get(scanId);
    const next: AnalysisRun = { ...(before ?? blank(scanId)), ...patch };
    runs.set(scanId, next);
    if (isActive(before) && !isActive(next)) {
      finished += 1;
      order.delete(scanId);
    }
    changed = true;
    if (notifyTimer !== null) return;
    // Changes made together (a loop of starts) are told once, after the loop.
    notifyTimer = setTimeout(notify, Math.max(0, notifiedAt + notifyMs - performance.now()));
  };

  const snapshot = (): TrackerSnapshot => {
    if (changed) {
      published = { runs: new Map(runs), finished };
      changed = false;
    }
    return published;
  };

  /** The running jobs, the oldest queued ones, and one more in rotation so none is forgotten. */
  const pickForRound = (): { scanId: string; jobId: string }[] => {
    const active = [...order]
      .map((scanId) => runs.get(scanId))
      .filter((run): run is AnalysisRun & { jobId: string } => isActive(run) && run?.jobId !== null && run?.jobId !== undefined);
    const running = active.filter((run) => run.phase === 'running');
    const queued = active.filter((run) => run.phase !== 'running');
    const picked = [...running, ...queued.slice(0, queuedPerRound)];
    const rest = queued.slice(queuedPerRound);
    if (rest.length > 0) {
      rotation = (rotation + 1) % rest.length;
      const extra = rest[rotation];
      if (extra) picked.push(extra);
    }
    return picked.map((run) => ({ scanId: run.scanId, jobId: run.jobId }));
  };

  const schedulePoll = (): void => {
    if (timer !== null || polling || controller.signal.aborted) return;
    let waiting = false;
    for (const scanId of order) {
      if (runs.get(scanId)?.jobId) {
        waiting = true;
        break;
      }
    }
    if (!waiting) return;
    timer = setTimeout(() => {
      timer = null;
      void pollRound();
    }, pollMs);
  };

  const pollRound = async (): Promise<void> => {
    polling = true;
    const { signal } = controller;
    try {
      // One request after the other: the poller never holds more than one connection.
      for (const { scanId, jobId } of pickForRound()) {
        if (signal.aborted) return;
        try {
          const job = await client.get<AnalysisJob>(`/v1/analyses/${encodeURIComponent(jobId)}`, { signal });
          // A newer run of the same scan may have replaced this one meanwhile.
          if (runs.get(scanId)?.jobId === jobId) update(scanId, fromJob(job));
        } catch (error) {
          if (isAbort(error) || signal.aborted) return;
          // A job that vanished cannot end by itself; anything else (a busy or restarting
          // server) is asked again next round.
          if (error instanceof ApiError && error.info.status === 404) update(scanId, refusal(error));
        }
      }
    } finally {
      polling = false;
      schedulePoll();
    }
  };

  const submitAll = async (): Promise<void> => {
    if (submitting) return;
    submitting = true;
    try {
      // An index, not shift(): shifting a list of 100,000 moves the rest each time.
      while (nextToSubmit < toSubmit.length) {
        const scanId = toSubmit[nextToSubmit++] as string;
        const { signal } = controller;
        if (signal.aborted) return;
        try {
          const job = await client.post<AnalysisJob>(`/v1/scans/${encodeURIComponent(scanId)}/analyses`, { body: {}, signal });
          update(scanId, fromJob(job));
          schedulePoll();
        } catch (error) {
          if (isAbort(error) || signal.aborted) return;
          update(scanId, refusal(error));
        }
      }
    } finally {
      submitting = false;
      if (nextToSubmit >= toSubmit.length) {
        toSubmit = [];
        nextToSubmit = 0;
      }
      // resume() may have queued runs again while the aborted loop was winding down.
      if (nextToSubmit < toSubmit.length && !controller.signal.aborted) void submitAll();
    }
  };

  return {
    start(scanId) {
      if (isActive(runs.get(scanId))) return;
      order.add(scanId);
      update(scanId, blank(scanId));
      toSubmit.push(scanId);
      void submitAll();
    },
    cancel(scanId) {
      const jobId = runs.get(scanId)?.jobId;
      if (!jobId) return;
      client.del<AnalysisJob>(`/v1/analyses/${encodeURIComponent(jobId)}`, { signal: controller.signal }).then(
        (job) => update(scanId, fromJob(job)),
        (error: unknown) => {
          if (!isAbort(error)) update(scanId, { reason: `Could not cancel: ${error instanceof Error ? error.message : String(error)}` });
        },
      );
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    snapshot,
    dispose() {
      controller.abort();
      if (timer !== null) clearTimeout(timer);
      timer = null;
    },
    resume() {
      if (!controller.signal.aborted) return;
      controller = new AbortController();
      // Runs whose request was aborted before it reached the server are sent again.
      const waiting = new Set(toSubmit.slice(nextToSubmit));
      for (const scanId of order) if (runs.get(scanId)?.phase === 'starting' && !waiting.has(scanId)) toSubmit.push(scanId);
      void submitAll();
      schedulePoll();
    },
  };
}
