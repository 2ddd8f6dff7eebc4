/**
 * A large export rendered by worker threads (export-worker.ts), each with its own connection to
 * the SQLite file, and handed back in order. Reading results and serializing them is an export's
 * CPU (a CSV of 1,000,000 findings: 6.5-6.8 s in one thread, 4.4-4.8 s in two workers, issue 15's
 * goal 5 s); the ranges are dealt round-robin, so the workers run side by side, and a bounded
 * number are asked ahead of the one being written, so memory holds a few megabytes of pages
 * whatever the export's size. The server's event loop
 * only writes, hashes and answers other requests meanwhile.
 */
import { Worker } from 'node:worker_threads';
import type { ExportFormat } from '#common/vocabulary.ts';
import type { ExportFilters } from '#server/api/schemas.ts';
import type { PageRange, RenderedPage } from '#server/exports/export-pages.ts';
import type { ExportWorkerData, FromExportWorker, ToExportWorker } from '#server/exports/export-worker-protocol.ts';
import { workerBootstrap } from '#server/worker-threads.ts';

/**
 * Ranges asked of each worker beyond the one being written. A range is a page (~120 KB of CSV),
 * a few milliseconds of a worker's time: with 2 asked ahead a worker ran dry whenever this thread
 * was writing, hashing or collecting garbage (10-14% of a worker's time idle). CSV of 999,181
 * findings with 2 workers, four interleaved pairs: 4.8-5.9 s at 2, 4.4-4.8 s at 16, each pair
 * faster; 32 pages held are ~4 MB.
 */
const AHEAD_PER_WORKER = 16;
const CLOSE_TIMEOUT_MS = 5000;

/**
 * A worker's young generation, MB. Rendering makes short-lived rows and strings at a high rate,
 * and V8 grows a busy thread's young generation to 48 MB (two 16 MB semi-spaces and a third for
 * large objects), all of it resident: two workers held 64 MB there. At 12 (4 MB semi-spaces) a
 * CSV of 1,000,000 findings peaked at 226-229 MB against 271-274 MB, in the same 4.2-4.7 s;
 * at 6 it took 6.3 s, the collector running all the time.
 */
const WORKER_YOUNG_GENERATION_MB = 12;

export type ParallelExport = {
  dataDir: string;
  format: ExportFormat;
  filters: ExportFilters;
  pseudonymSecret: string | null;
  ranges: readonly Required<PageRange>[];
  workers: number;
  /** A test's hand on each thread once it is ready, to stop one as a crash would. */
  onWorker?: ((worker: Worker) => void) | undefined;
};

/** What a worker reports: an Error, or (an error class the thread could not clone) a plain object with its message. */
function asError(value: unknown): Error {
  if (value instanceof Error) return value;
  const message = typeof value === 'object' && value !== null && 'message' in value ? String((value as { message: unknown }).message) : String(value);
  return new Error(message);
}

type Waiter = { resolve: (page: RenderedPage) => void; reject: (err: Error) => void };

type ExportWorker = { worker: Worker; send(message: ToExportWorker): void; close(): Promise<void> };

function startWorker(data: ExportWorkerData, onPage: (id: number, page: RenderedPage) => void, onFailure: (err: Error) => void): Promise<ExportWorker> {
  const worker = new Worker(workerBootstrap(import.meta.url, 'export-worker'), {
    eval: true,
    workerData: data,
    resourceLimits: { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB },
  });
  let closed: (() => void) | undefined;
  // Listened for from the start: a thread that died (out of memory, a native fault) emitted its
  // one 'exit' before the export closes it, and waiting for another held the export, its file
  // and its request for good.
  const gone = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  const handle: ExportWorker = {
    worker,
    send: (message) => worker.postMessage(message),
    close: async () => {
      const done = new Promise<void>((resolve) => (closed = resolve));
      worker.postMessage({ type: 'close' } satisfies ToExportWorker);
      const timer = setTimeout(() => void worker.terminate(), CLOSE_TIMEOUT_MS);
      await Promise.race([done, gone]);
      clearTimeout(timer);
      await worker.terminate();
    },
  };
  return new Promise((resolve, reject) => {
    let ready = false;
    worker.on('message', (message: FromExportWorker) => {
      switch (message.type) {
        case 'ready':
          ready = true;
          resolve(handle);
          return;
        case 'range': {
          // A transferred Uint8Array arrives as one: viewed as a Buffer, not copied, and its
          // memory handed back to the worker to fill again once written (export-worker.ts).
          const buffer = message.bytes.buffer as ArrayBuffer;
          const written = (): void => worker.postMessage({ type: 'reuse', buffer } satisfies ToExportWorker, [buffer]);
          onPage(message.id, { bytes: Buffer.from(buffer, message.bytes.byteOffset, message.bytes.byteLength), rows: message.rows, written });
          return;
        }
        case 'error': {
          const err = Object.assign(new Error(message.message), { code: message.code });
          if (!ready) reject(err);
          else onFailure(err);
          return;
        }
        case 'closed':
          closed?.();
          return;
      }
    });
    worker.once('error', (err: unknown) => {
      if (!ready) reject(asError(err));
      else onFailure(asError(err));
    });
    worker.once('exit', (code) => {
      // After an 'error' message that said why, this rejection is the second and does nothing.
      if (!ready) reject(new Error(`export worker exited (${code}) before it was ready`));
      else if (!closed) onFailure(new Error(`export worker exited (${code})`));
    });
  });
}

/**
 * The pages of `ranges`, in order, rendered by `workers` threads. Rejects (workers stopped) if
 * one cannot start or a range cannot be read; the export then fails as a one-thread one would.
 */
export async function* renderInWorkers(job: ParallelExport): AsyncGenerator<RenderedPage> {
  // One settlement per range asked, by id; a failure of any range fails the export, so it
  // rejects every range still outstanding.
  const asked = new Map<number, Waiter>();
  const results: Promise<RenderedPage>[] = [];
  let failure: Error | undefined;
  const fail = (err: Error): void => {
    failure ??= err;
    for (const waiter of asked.values()) waiter.reject(failure);
    asked.clear();
  };
  const onPage = (id: number, page: RenderedPage): void => {
    asked.get(id)?.resolve(page);
    asked.delete(id);
  };
  const data: ExportWorkerData = {
    dataDir: job.dataDir,
    nativeBinding: process.env['MIA_SQLITE_BINDING'],
    format: job.format,
    filters: job.filters,
    pseudonymSecret: job.pseudonymSecret,
  };
  const started = await Promise.allSettled(Array.from({ length: job.workers }, () => startWorker(data, onPage, fail)));
  const workers = started.flatMap((s) => (s.status === 'fulfilled' ? [s.value] : []));
  for (const { worker } of workers) job.onWorker?.(worker);
  try {
    const notStarted = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (notStarted) throw asError(notStarted.reason);
    for (let next = 0; next < job.ranges.length; next += 1) {
      for (let id = results.length; id < job.ranges.length && id < next + AHEAD_PER_WORKER * workers.length; id += 1) {
        if (failure) throw failure;
        const result = new Promise<RenderedPage>((resolve, reject) => asked.set(id, { resolve, reject }));
        // Awaited in turn below; one rejected before its turn must not count as unhandled.
        result.catch(() => undefined);
        results.push(result);
        const range = job.ranges[id]!;
        workers[id % workers.length]!.send({ type: 'range', id, afterId: range.afterId, throughId: range.throughId });
      }
      const page = await results[next]!;
      delete results[next];
      if (page.rows > 0) yield page;
    }
  } finally {
    await Promise.all(workers.map((w) => w.close()));
  }
}
