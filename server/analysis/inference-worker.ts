/**
 * Worker thread entry: one onnxruntime session, run on request. onnxruntime-node's run computes
 * on the thread that calls it, so in the server's main thread it would hold the event loop (the
 * API, progress events) for a whole batch and leave the next batch's reading and preprocessing
 * waiting; here it runs beside them (worker-session.ts is the other end).
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import type { Tensor } from '#server/analysis/decode.ts';
import type { AreaTensor, FromWorker, SessionOptions, ToWorker } from '#server/analysis/inference-protocol.ts';

if (!parentPort) throw new Error('inference-worker.ts runs as a worker thread');
const port = parentPort;
const options = workerData as SessionOptions;

const post = (message: FromWorker, transfer: ArrayBuffer[] = []): void => port.postMessage(message, transfer);
const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

/** The run's outputs as float32 views on onnxruntime's memory (copied into an area or transferred next). */
function float32Outputs(results: ort.InferenceSession.OnnxValueMapType): Record<string, Tensor> {
  const outputs: Record<string, Tensor> = {};
  for (const [name, value] of Object.entries(results)) {
    const data = (value as ort.Tensor).data;
    if (!(data instanceof Float32Array)) throw new Error(`model output ${name} is not float32`);
    outputs[name] = { data, dims: (value as ort.Tensor).dims };
  }
  return outputs;
}

/** Transferred back whole, so each output gets a buffer of its own. */
function ownBuffers(outputs: Record<string, Tensor>): Record<string, Tensor> {
  const own: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(outputs)) {
    own[name] = t.data.byteOffset === 0 && t.data.byteLength === t.data.buffer.byteLength ? t : { data: t.data.slice(), dims: t.dims };
  }
  return own;
}

async function createSession(): Promise<ort.InferenceSession | null> {
  try {
    return await ort.InferenceSession.create(options.modelPath, {
      // Explicit, so a build with other providers compiled in still runs the same CPU kernels.
      executionProviders: ['cpu'],
      intraOpNumThreads: options.intraOpThreads,
      interOpNumThreads: options.interOpThreads,
      graphOptimizationLevel: 'all',
      executionMode: 'sequential',
    });
  } catch (err) {
    // Reported as a message, not thrown: the host decides what a model that does not load means.
    post({ type: 'error', id: 0, message: messageOf(err) });
    port.close();
    return null;
  }
}

const session = await createSession();
if (session) serve(session);

/**
 * Shared areas by number, and one buffer of this thread's own that a feed in an area is copied
 * into: onnxruntime-node refuses a SharedArrayBuffer's memory as a tensor's data.
 */
const areas = new Map<number, SharedArrayBuffer>();
let scratch = new Float32Array(0);

function areaOf(area: number): SharedArrayBuffer {
  const buffer = areas.get(area);
  if (!buffer) throw new Error(`shared area ${area} is not registered`);
  return buffer;
}

function feedsFromArea(buffer: SharedArrayBuffer, feeds: Record<string, AreaTensor>): Record<string, ort.Tensor> {
  const total = Object.values(feeds).reduce((n, t) => n + t.length, 0);
  if (scratch.length < total) scratch = new Float32Array(total);
  const out: Record<string, ort.Tensor> = {};
  let at = 0;
  for (const [name, t] of Object.entries(feeds)) {
    const own = scratch.subarray(at, at + t.length);
    own.set(new Float32Array(buffer, t.offset, t.length));
    out[name] = new ort.Tensor('float32', own, t.dims);
    at += t.length;
  }
  return out;
}

/** Copies the outputs into the area from byte `at`; null when they do not fit (then they travel). */
function outputsToArea(buffer: SharedArrayBuffer, at: number, outputs: Record<string, Tensor>): Record<string, AreaTensor> | null {
  const bytes = Object.values(outputs).reduce((n, t) => n + t.data.byteLength, 0);
  if (at % Float32Array.BYTES_PER_ELEMENT !== 0 || at + bytes > buffer.byteLength) return null;
  const placed: Record<string, AreaTensor> = {};
  let offset = at;
  for (const [name, t] of Object.entries(outputs)) {
    new Float32Array(buffer, offset, t.data.length).set(t.data);
    placed[name] = { offset, length: t.data.length, dims: t.dims };
    offset += t.data.byteLength;
  }
  return placed;
}

async function runOne(session: ort.InferenceSession, message: Extract<ToWorker, { type: 'run' | 'run-in-area' }>): Promise<void> {
  const buffer = message.type === 'run-in-area' ? areaOf(message.area) : null;
  const feeds: Record<string, ort.Tensor> = {};
  if (message.type === 'run-in-area') Object.assign(feeds, feedsFromArea(buffer as SharedArrayBuffer, message.feeds));
  else for (const [name, t] of Object.entries(message.feeds)) feeds[name] = new ort.Tensor('float32', t.data, t.dims);
  const started = performance.now();
  const outputs = float32Outputs(await session.run(feeds));
  const runMs = performance.now() - started;
  const placed = message.type === 'run-in-area' ? outputsToArea(buffer as SharedArrayBuffer, message.outputsAt, outputs) : null;
  if (placed) {
    post({ type: 'result-in-area', id: message.id, outputs: placed, runMs });
    return;
  }
  const own = ownBuffers(outputs);
  post({ type: 'result', id: message.id, outputs: own, runMs }, [...new Set(Object.values(own).map((t) => t.data.buffer as ArrayBuffer))]);
}

function serve(session: ort.InferenceSession): void {
  // One run at a time, in arrival order: the session is not re-entrant with these settings.
  let queue: Promise<void> = Promise.resolve();
  port.on('message', (message: ToWorker) => {
    queue = queue.then(async () => {
      switch (message.type) {
        case 'area':
          areas.set(message.area, message.buffer);
          return;
        case 'drop-area':
          areas.delete(message.area);
          return;
        case 'release':
          await session.release().catch(() => undefined);
          post({ type: 'released' });
          port.close();
          return;
        default:
          try {
            await runOne(session, message);
          } catch (err) {
            post({ type: 'error', id: message.id, message: messageOf(err) });
          }
      }
    });
  });
  post({ type: 'ready' });
}
