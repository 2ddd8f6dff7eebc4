/**
 * Messages between the analysis engine and the inference worker (inference-worker.ts). Tensors
 * travel either as float32 arrays whose buffers are transferred, not copied, or in a shared area
 * (shared-areas.ts): memory both threads see, registered with the worker once and reused, so a
 * batch's input and outputs need no new buffer on this thread.
 */
import type { Tensor } from '#server/analysis/decode.ts';

export type SessionOptions = { modelPath: string; intraOpThreads: number; interOpThreads: number };

/** A tensor inside a shared area: `length` float32 values from byte `offset`. */
export type AreaTensor = { offset: number; length: number; dims: readonly number[] };

export type ToWorker =
  | { type: 'run'; id: number; feeds: Record<string, Tensor> }
  /** The worker keeps the area under its number until told to drop it. */
  | { type: 'area'; area: number; buffer: SharedArrayBuffer }
  | { type: 'drop-area'; area: number }
  /** Feeds read from the area; outputs written into it from `outputsAt` when they fit. */
  | { type: 'run-in-area'; id: number; area: number; feeds: Record<string, AreaTensor>; outputsAt: number }
  | { type: 'release' };

export type FromWorker =
  | { type: 'ready' }
  /** runMs: how long session.run took in the worker (the benchmark sets it beside a bare run). */
  | { type: 'result'; id: number; outputs: Record<string, Tensor>; runMs: number }
  /** The outputs of a run-in-area, written into its area. */
  | { type: 'result-in-area'; id: number; outputs: Record<string, AreaTensor>; runMs: number }
  /** id 0: the session could not be created. */
  | { type: 'error'; id: number; message: string }
  | { type: 'released' };
