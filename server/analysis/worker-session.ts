/**
 * The engine's handle on an onnxruntime session living in a worker thread (inference-worker.ts):
 * run() posts the feeds (their buffers are transferred) and resolves with the outputs. While the
 * worker computes, this thread reads and preprocesses the next batch and answers requests.
 */
import { Worker } from 'node:worker_threads';
import { workerBootstrap } from '#server/worker-threads.ts';
import type { Tensor } from '#server/analysis/decode.ts';
import type { FromWorker, SessionOptions, ToWorker } from '#server/analysis/inference-protocol.ts';

/** A run's outputs, and how long session.run took in the worker (without the messages). */
export type RunResult = { outputs: Record<string, Tensor>; runMs: number };

export type InferenceSession = {
  /** Transfers the feeds' buffers: the caller must not use them afterwards. */
  run(feeds: Record<string, Tensor>): Promise<RunResult>;
  release(): Promise<void>;
};

type Pending = { resolve: (result: RunResult) => void; reject: (err: Error) => void };

class WorkerSession implements InferenceSession {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #failure: Error | null = null;
  #released: Promise<void> | null = null;

  constructor(worker: Worker) {
    this.#worker = worker;
    worker.on('message', (message: FromWorker) => this.#receive(message));
    worker.on('error', (err) => this.#fail(err));
    worker.on('exit', (code) => this.#fail(new Error(`inference worker exited (code ${code})`)));
  }

  #receive(message: FromWorker): void {
    if (message.type !== 'result' && message.type !== 'error') return;
    const pending = this.#pending.get(message.id);
    if (!pending) return;
    this.#pending.delete(message.id);
    // An idle worker must not keep a finished CLI process alive.
    if (this.#pending.size === 0) this.#worker.unref();
    if (message.type === 'result') pending.resolve({ outputs: message.outputs, runMs: message.runMs });
    else pending.reject(new Error(message.message));
  }

  #fail(err: Error): void {
    this.#failure ??= err;
    for (const p of this.#pending.values()) p.reject(this.#failure);
    this.#pending.clear();
  }

  run(feeds: Record<string, Tensor>): Promise<RunResult> {
    if (this.#failure) return Promise.reject(this.#failure);
    if (this.#released) return Promise.reject(new Error('inference session released'));
    const id = this.#nextId++;
    const message: ToWorker = { type: 'run', id, feeds };
    const transfer = [...new Set(Object.values(feeds).map((t) => t.data.buffer as ArrayBuffer))];
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject });
      this.#worker.ref();
      this.#worker.postMessage(message, transfer);
    });
  }

  release(): Promise<void> {
    this.#released ??= (async () => {
      if (!this.#failure) {
        const done = new Promise<void>((resolve) => {
          this.#worker.once('exit', () => resolve());
          this.#worker.on('message', (m: FromWorker) => {
            if (m.type === 'released') resolve();
          });
        });
        // Held while it winds down, or a process with nothing else to do would exit first.
        this.#worker.ref();
        this.#worker.postMessage({ type: 'release' } satisfies ToWorker);
        await done;
      }
      await this.#worker.terminate();
    })();
    return this.#released;
  }
}

/** Starts a worker and resolves once its session is loaded (or rejects with onnxruntime's reason). */
export function startWorkerSession(options: SessionOptions, onExit?: () => void): Promise<InferenceSession> {
  const worker = new Worker(workerBootstrap(import.meta.url, 'inference-worker'), { eval: true, workerData: options });
  return new Promise((resolve, reject) => {
    let loading = true;
    const fail = (err: Error): void => {
      if (!loading) return;
      loading = false;
      void worker.terminate();
      reject(err);
    };
    // Kept for the worker's life: an 'error' event without a listener would take the server down.
    worker.on('error', fail);
    worker.on('exit', (code) => {
      fail(new Error(`inference worker exited (code ${code}) before its session loaded`));
      onExit?.();
    });
    worker.on('message', (message: FromWorker) => {
      if (!loading) return;
      if (message.type === 'ready') {
        loading = false;
        worker.unref();
        resolve(new WorkerSession(worker));
      } else if (message.type === 'error' && message.id === 0) {
        fail(new Error(message.message));
      }
    });
  });
}
