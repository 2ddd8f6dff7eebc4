/**
 * The renderer's analysis tracker against a fake API: forty analyses started at once (the
 * worklist's "Analyse N not analysed") are sent one request at a time and followed by one
 * poller, so the browser never spends more than two of its six connections per origin on them
 * (the viewer's frames and thumbnails keep the rest); twenty thousand at once are told to the
 * window once, not per start; a 409 keeps the server's words.
 */
import { describe, expect, it } from 'vitest';
import { ApiError, type Client } from '../../renderer/src/api/client.ts';
import type { AnalysisJob } from '../../renderer/src/api/types.ts';
import { createAnalysisTracker, isActive, type AnalysisTracker } from '../../renderer/src/analysis-tracker.ts';

type FakeJob = { id: string; scanId: string; status: AnalysisJob['status']; done: number };

/** A server with one analysis slot, first in first out; every GET moves time on a little. */
function fakeApi(options: { refuse?: Set<string>; slices?: number } = {}) {
  const jobs: FakeJob[] = [];
  const stats = { inFlight: 0, maxInFlight: 0, posts: 0, gets: 0, maxPostsInFlight: 0, maxGetsInFlight: 0 };
  let postsInFlight = 0;
  let getsInFlight = 0;
  const slices = options.slices ?? 2;
  const view = (job: FakeJob): AnalysisJob => ({
    id: job.id,
    scan_id: job.scanId,
    status: job.status,
    model: { id: 'm', name: 'mia phantom detector', version: '1.0.0', sha256: 'x' },
    thresholds: {},
    progress: { slices_done: job.done, slices_total: slices },
    reason: null,
    recommendation: null,
    findings: job.status === 'succeeded' ? 1 : null,
    requested_by: null,
    created_at: '',
    started_at: null,
    finished_at: null,
  });
  const advance = () => {
    const current = jobs.find((j) => j.status === 'queued' || j.status === 'running');
    if (!current) return;
    current.status = 'running';
    current.done += 1;
    if (current.done >= slices) current.status = 'succeeded';
  };
  const request = async <T>(kind: 'post' | 'get', work: () => T): Promise<T> => {
    stats.inFlight += 1;
    stats.maxInFlight = Math.max(stats.maxInFlight, stats.inFlight);
    if (kind === 'post') stats.maxPostsInFlight = Math.max(stats.maxPostsInFlight, ++postsInFlight);
    else stats.maxGetsInFlight = Math.max(stats.maxGetsInFlight, ++getsInFlight);
    try {
      await new Promise((resolve) => setTimeout(resolve, 1));
      return work();
    } finally {
      stats.inFlight -= 1;
      if (kind === 'post') postsInFlight -= 1;
      else getsInFlight -= 1;
    }
  };
  const client = {
    post: <T>(path: string) =>
      request('post', () => {
        stats.posts += 1;
        const scanId = decodeURIComponent(/\/v1\/scans\/([^/]+)\/analyses/.exec(path)![1]!);
        if (options.refuse?.has(scanId)) {
          throw new ApiError({ status: 409, title: 'Conflict', message: 'A scan in status reported cannot move to queued', details: 'allowed targets from reported: archived', requestId: 'req-1' });
        }
        const job: FakeJob = { id: `job-${jobs.length + 1}`, scanId, status: 'queued', done: 0 };
        jobs.push(job);
        return view(job) as T;
      }),
    get: <T>(path: string) =>
      request('get', () => {
        stats.gets += 1;
        advance();
        const id = decodeURIComponent(/\/v1\/analyses\/([^/]+)$/.exec(path)![1]!);
        return view(jobs.find((j) => j.id === id)!) as T;
      }),
    del: <T>() => Promise.reject<T>(new Error('not used')),
  } satisfies Pick<Client, 'get' | 'post' | 'del'>;
  return { client, stats, jobs };
}

async function untilIdle(tracker: AnalysisTracker, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while ([...tracker.snapshot().runs.values()].some(isActive)) {
    if (Date.now() > until) throw new Error('runs still active');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('analysis tracker', () => {
  it('forty analyses: one request at a time each way, every run followed to its end', async () => {
    const api = fakeApi();
    const tracker = createAnalysisTracker(api.client, { pollMs: 2 });
    const told: number[] = [];
    tracker.subscribe(() => told.push(tracker.snapshot().finished));
    const scans = Array.from({ length: 40 }, (_, i) => `1.2.3.${i}`);
    for (const scan of scans) tracker.start(scan);
    await untilIdle(tracker);
    const { runs, finished } = tracker.snapshot();
    expect(scans.map((s) => runs.get(s)?.phase)).toEqual(scans.map(() => 'succeeded'));
    expect(finished).toBe(40);
    expect(api.stats.posts).toBe(40);
    expect(api.stats.maxPostsInFlight).toBe(1);
    expect(api.stats.maxGetsInFlight).toBe(1);
    expect(api.stats.maxInFlight).toBeLessThanOrEqual(2);
    // The server ran them first in, first out; each run saw its own job.
    expect(scans.map((s) => runs.get(s)?.jobId)).toEqual(api.jobs.map((j) => j.id));
    // Listeners were told along the way, and last of the final state (no change goes untold).
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(told.length).toBeGreaterThan(1);
    expect(told.at(-1)).toBe(40);
    tracker.dispose();
  });

  it('twenty thousand started at once (after a large import): told once for the lot, each sent once', async () => {
    const api = fakeApi();
    const tracker = createAnalysisTracker(api.client, { pollMs: 2 });
    const told: number[] = [];
    tracker.subscribe(() => told.push(tracker.snapshot().runs.size));
    const scans = Array.from({ length: 20_000 }, (_, i) => `1.2.5.${i}`);
    for (const scan of scans) tracker.start(scan);
    expect(tracker.snapshot().runs.size).toBe(20_000);
    await new Promise((resolve) => setTimeout(resolve, 20));
    // One notification after the loop, not one (and one copy of every run) per start.
    expect(told[0]).toBe(20_000);
    // A remount (dispose, resume) sends the rest without sending any twice.
    tracker.dispose();
    tracker.resume();
    while (api.stats.posts < 60) await new Promise((resolve) => setTimeout(resolve, 2));
    tracker.dispose();
    const sent = api.jobs.map((j) => j.scanId);
    expect(new Set(sent).size).toBe(sent.length);
    expect(sent).toEqual(scans.slice(0, sent.length));
    expect(api.stats.maxPostsInFlight).toBe(1);
  });

  it('asks about a few jobs a round, not every queued one', async () => {
    const api = fakeApi({ slices: 1000 });
    const tracker = createAnalysisTracker(api.client, { pollMs: 50, queuedPerRound: 2 });
    for (let i = 0; i < 30; i += 1) tracker.start(`1.2.4.${i}`);
    while (api.stats.posts < 30) await new Promise((resolve) => setTimeout(resolve, 2));
    const before = api.stats.gets;
    // 120 ms hold at most three rounds 50 ms apart (fewer on a loaded machine, never more).
    await new Promise((resolve) => setTimeout(resolve, 120));
    tracker.dispose();
    // Each round: the running job, the two oldest queued ones, one more in rotation.
    expect(api.stats.gets - before).toBeLessThanOrEqual(3 * 4);
    const phases = [...tracker.snapshot().runs.values()].map((r) => r.phase);
    expect(phases.filter((p) => p === 'running')).toHaveLength(1);
    expect(phases.filter((p) => p === 'queued')).toHaveLength(29);
  });

  it('a refused analysis (409, a reported scan) keeps the server\'s message and request id', async () => {
    const api = fakeApi({ refuse: new Set(['9.9.9']) });
    const tracker = createAnalysisTracker(api.client, { pollMs: 2 });
    tracker.start('9.9.9');
    await untilIdle(tracker);
    const run = tracker.snapshot().runs.get('9.9.9')!;
    expect(run.phase).toBe('error');
    expect(run.refusedWith).toBe(409);
    expect(run.reason).toBe('A scan in status reported cannot move to queued (allowed targets from reported: archived) [request req-1]');
    expect(tracker.snapshot().finished).toBe(1);
  });

  it('starting a scan that is already being followed does nothing', async () => {
    const api = fakeApi();
    const tracker = createAnalysisTracker(api.client, { pollMs: 2 });
    tracker.start('1.1');
    tracker.start('1.1');
    await untilIdle(tracker);
    expect(api.stats.posts).toBe(1);
  });
});
