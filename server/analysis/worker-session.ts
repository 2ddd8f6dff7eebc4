/**
 * The engine's handle on an onnxruntime session living in a worker thread (inference-worker.ts):
 * run() posts the feeds and resolves with the outputs. Feeds written into an input area travel
 * in shared memory and their outputs come back in it (shared-areas.ts); others are transferred.
 * While the worker computes, this thread reads and preprocesses the next batch and answers
 * requests.
 */
import { Worker } from 'node:worker_threads';
import { workerBootstrap } from '#server/worker-threads.ts';
import type { Tensor } from '#server/analysis/decode.ts';
import type { AreaTensor, FromWorker, SessionOptions, ToWorker } from '#server/analysis/inference-protocol.ts';
import { SharedAreas, viewOf, type SharedArea } from '#server/analysis/shared-areas.ts';

/**
 * A run's outputs, and how long session.run took in the worker (without the messages). Outputs
 * of a run whose feeds were in an input area may be views into it: read them before releasing it.
 */
export type RunResult = { outputs: Record<string, Tensor>; runMs: number };

/** Room for one run's input, shared with the worker; released once its run's outputs are read. */
export type InputArea = { data: Float32Array; release(): void };

export type InferenceSession = {
  inputArea(floats: number): InputArea;
  /** Feeds outside an input area have their buffers transferred: the caller must not use them afterwards. */
  run(feeds: Record<string, Tensor>): Promise<RunResult>;
  release(): Promise<void>;
};

type Pending = { resolve: (result: RunResult) => void; reject: (err: Error) => void; area: SharedArea | null; inputBytes: number };

class WorkerSession implements InferenceSession {
  readonly #worker: Worker;
  readonly #pending = new Map<number, Pending>();
  #nextId = 1;
  #failure: Error | null = null;
  #released: Promise<void> | null = null;
  readonly #areas: SharedAreas;

  constructor(worker: Worker) {
    this.#worker = worker;
    this.#areas = new SharedAreas(
      (area) => this.#post({ type: 'area', area: area.id, buffer: area.buffer }),
      (area) => this.#post({ type: 'drop-area', area: area.id }),
    );
    worker.on('message', (message: FromWorker) => this.#receive(message));
    worker.on('error', (err) => this.#fail(err));
    worker.on('exit', (code) => this.#fail(new Error(`inference worker exited (code ${code})`)));
  }

  #post(message: ToWorker, transfer: ArrayBuffer[] = []): void {
    this.#worker.postMessage(message, transfer);
  }

  #receive(message: FromWorker): void {
    if (message.type !== 'result' && message.type !== 'result-in-area' && message.type !== 'error') return;
    const pending = this.#pending.get(message.id);
    if (!pending) return;
    this.#pending.delete(message.id);
    // An idle worker must not keep a finished CLI process alive.
    if (this.#pending.size === 0) this.#worker.unref();
    if (message.type === 'error') {
      pending.reject(new Error(message.message));
      return;
    }
    const outputs: Record<string, Tensor> = {};
    let outputBytes = 0;
    for (const [name, t] of Object.entries<Tensor | AreaTensor>(message.outputs)) {
      const data = 'data' in t ? t.data : viewOf(pending.area as SharedArea, t);
      outputs[name] = { data, dims: t.dims };
      outputBytes += data.byteLength;
    }
    if (pending.area) this.#areas.sawRun(pending.inputBytes, outputBytes);
    pending.resolve({ outputs, runMs: message.runMs });
  }

  inputArea(floats: number): InputArea {
    const { area, input } = this.#areas.acquire(floats);
    return { data: input, release: () => this.#areas.release(area) };
  }

  /** The one input area holding every feed, or null (then the feeds are transferred). */
  #areaOfFeeds(feeds: Record<string, Tensor>): SharedArea | null {
    const found = new Set(Object.values(feeds).map((t) => this.#areas.areaOf(t.data)));
    const [area] = found;
    return found.size === 1 && area ? area : null;
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
    const area = this.#areaOfFeeds(feeds);
    const inputBytes = Object.values(feeds).reduce((n, t) => n + t.data.byteLength, 0);
    return new Promise((resolve, reject) => {
      this.#pending.set(id, { resolve, reject, area, inputBytes });
      this.#worker.ref();
      if (area) {
        const placed: Record<string, AreaTensor> = {};
        let end = 0;
        for (const [name, t] of Object.entries(feeds)) {
          placed[name] = { offset: t.data.byteOffset, length: t.data.length, dims: t.dims };
          end = Math.max(end, t.data.byteOffset + t.data.byteLength);
        }
        this.#post({ type: 'run-in-area', id, area: area.id, feeds: placed, outputsAt: end });
      } else {
        this.#post({ type: 'run', id, feeds }, [...new Set(Object.values(feeds).map((t) => t.data.buffer as ArrayBuffer))]);
      }
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
