/**
 * Messages between the analysis engine and the inference worker (inference-worker.ts). Tensors
 * travel as float32 arrays whose buffers are transferred, not copied.
 */
import type { Tensor } from '#server/analysis/decode.ts';

export type SessionOptions = { modelPath: string; intraOpThreads: number; interOpThreads: number };

export type ToWorker = { type: 'run'; id: number; feeds: Record<string, Tensor> } | { type: 'release' };

export type FromWorker =
  | { type: 'ready' }
  /** runMs: how long session.run took in the worker (the benchmark sets it beside a bare run). */
  | { type: 'result'; id: number; outputs: Record<string, Tensor>; runMs: number }
  /** id 0: the session could not be created. */
  | { type: 'error'; id: number; message: string }
  | { type: 'released' };
