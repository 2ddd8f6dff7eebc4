/**
 * Worker thread entry: one onnxruntime session, run on request. onnxruntime-node's run computes
 * on the thread that calls it, so in the server's main thread it would hold the event loop (the
 * API, progress events) for a whole batch and leave the next batch's reading and preprocessing
 * waiting; here it runs beside them (worker-session.ts is the other end).
 */
import { parentPort, workerData } from 'node:worker_threads';
import * as ort from 'onnxruntime-node';
import type { Tensor } from '#server/analysis/decode.ts';
import type { FromWorker, SessionOptions, ToWorker } from '#server/analysis/inference-protocol.ts';

if (!parentPort) throw new Error('inference-worker.ts runs as a worker thread');
const port = parentPort;
const options = workerData as SessionOptions;

const post = (message: FromWorker, transfer: ArrayBuffer[] = []): void => port.postMessage(message, transfer);
const messageOf = (err: unknown): string => (err instanceof Error ? err.message : String(err));

function plainOutputs(results: ort.InferenceSession.OnnxValueMapType): Record<string, Tensor> {
  const outputs: Record<string, Tensor> = {};
  for (const [name, value] of Object.entries(results)) {
    const data = (value as ort.Tensor).data;
    if (!(data instanceof Float32Array)) throw new Error(`model output ${name} is not float32`);
    // Transferred back whole, so each output gets a buffer of its own.
    const own = data.byteOffset === 0 && data.byteLength === data.buffer.byteLength ? data : data.slice();
    outputs[name] = { data: own, dims: (value as ort.Tensor).dims };
  }
  return outputs;
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

function serve(session: ort.InferenceSession): void {
  // One run at a time, in arrival order: the session is not re-entrant with these settings.
  let queue: Promise<void> = Promise.resolve();
  port.on('message', (message: ToWorker) => {
    queue = queue.then(async () => {
      if (message.type === 'release') {
        await session.release().catch(() => undefined);
        post({ type: 'released' });
        port.close();
        return;
      }
      try {
        const feeds: Record<string, ort.Tensor> = {};
        for (const [name, t] of Object.entries(message.feeds)) feeds[name] = new ort.Tensor('float32', t.data, t.dims);
        const started = performance.now();
        const outputs = plainOutputs(await session.run(feeds));
        const runMs = performance.now() - started;
        post({ type: 'result', id: message.id, outputs, runMs }, [...new Set(Object.values(outputs).map((t) => t.data.buffer as ArrayBuffer))]);
      } catch (err) {
        post({ type: 'error', id: message.id, message: messageOf(err) });
      }
    });
  });
  post({ type: 'ready' });
}
