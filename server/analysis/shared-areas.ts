/**
 * Memory this thread shares with the inference worker, reused batch after batch: a batch's input
 * is written into an area, the worker reads it there and writes the outputs after it.
 *
 * Why: every ArrayBuffer this thread creates or receives counts towards V8's old-generation limit
 * as memory allocated since the last full collection, so fresh input and output buffers for
 * each batch (9 MB a 100-slice job with the bundled model) started a full collection about once
 * a job. Its marking runs on V8's helper threads, which on two cores take time from inference.
 * A SharedArrayBuffer is counted once, when it is created.
 */
import type { AreaTensor } from '#server/analysis/inference-protocol.ts';

export type SharedArea = {
  readonly id: number;
  readonly buffer: SharedArrayBuffer;
};

/** Areas kept while free; more are made when busy ones do not suffice, and dropped when freed. */
const KEPT_AREAS = 8;
/** Capacity rounds up to this, so the batches of a job (2, 4, 8, 8, ..., the rest) share areas. */
const GRANULE = 64 * 1024;

export class SharedAreas {
  readonly #free: SharedArea[] = [];
  readonly #busy = new Set<SharedArea>();
  readonly #byBuffer = new Map<SharedArrayBuffer, SharedArea>();
  #nextId = 1;
  /** Output bytes per input byte, as last seen: how much room to leave after an input. */
  #outputRatio = 1;
  readonly #announce: (area: SharedArea) => void;
  readonly #drop: (area: SharedArea) => void;

  /** announce: hand a new area to the worker; drop: tell it to forget one. */
  constructor(announce: (area: SharedArea) => void, drop: (area: SharedArea) => void) {
    this.#announce = announce;
    this.#drop = drop;
  }

  /** A free area with room for `floats` input values and the outputs expected after them. */
  acquire(floats: number): { area: SharedArea; input: Float32Array } {
    const inputBytes = floats * Float32Array.BYTES_PER_ELEMENT;
    const need = inputBytes + Math.ceil(inputBytes * this.#outputRatio);
    const index = this.#free.findIndex((a) => a.buffer.byteLength >= need);
    if (index < 0 && this.#free.length >= KEPT_AREAS) {
      // Make room by dropping the smallest free area, which cannot hold this batch anyway.
      const smallest = this.#free.reduce((s, a, i) => (a.buffer.byteLength < (this.#free[s] as SharedArea).buffer.byteLength ? i : s), 0);
      this.#forget((this.#free.splice(smallest, 1)[0] as SharedArea));
    }
    let area: SharedArea;
    if (index >= 0) {
      area = this.#free.splice(index, 1)[0] as SharedArea;
    } else {
      area = { id: this.#nextId++, buffer: new SharedArrayBuffer(Math.ceil(need / GRANULE) * GRANULE) };
      this.#byBuffer.set(area.buffer, area);
      this.#announce(area);
    }
    this.#busy.add(area);
    return { area, input: new Float32Array(area.buffer, 0, floats) };
  }

  /** The busy area whose memory `data` is a view of, if any. */
  areaOf(data: Float32Array): SharedArea | undefined {
    const area = data.buffer instanceof SharedArrayBuffer ? this.#byBuffer.get(data.buffer) : undefined;
    return area && this.#busy.has(area) ? area : undefined;
  }

  /** Learns how much room outputs take, from a run's input and output sizes in bytes. */
  sawRun(inputBytes: number, outputBytes: number): void {
    if (inputBytes > 0) this.#outputRatio = outputBytes / inputBytes;
  }

  /** Back to the pool: the caller no longer reads or writes it, and the worker is done with it. */
  release(area: SharedArea): void {
    if (!this.#busy.delete(area)) return;
    if (this.#free.length < KEPT_AREAS) this.#free.push(area);
    else this.#forget(area);
  }

  #forget(area: SharedArea): void {
    this.#byBuffer.delete(area.buffer);
    this.#drop(area);
  }
}

/** A tensor's values in an area, as a view (valid until the area is released). */
export function viewOf(area: SharedArea, t: AreaTensor): Float32Array {
  return new Float32Array(area.buffer, t.offset, t.length);
}
