/**
 * The inference worker with real models: a batch written into a shared input area must give
 * exactly the outputs the same batch gives when its buffer is transferred, whether the outputs
 * fit in the area (the bundled detector, the example segmenter) or outgrow the room left after
 * the input on a first run (a model whose output is four copies of its input), and areas are
 * reused only once released.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tensor } from '#server/analysis/decode.ts';
import { startWorkerSession, type InferenceSession } from '#server/analysis/worker-session.ts';
import { MODEL_DIR, python, REPO_ROOT } from './helpers.ts';

const PLANE = 128 * 128;

/** Deterministic values in [0, 1): a batch the model sees as any other input. */
function batchValues(slices: number, seed: number): Float32Array {
  const out = new Float32Array(slices * PLANE);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = (x >>> 0) / 2 ** 32;
  }
  return out;
}

function copies(outputs: Record<string, Tensor>): Record<string, number[]> {
  return Object.fromEntries(Object.entries(outputs).map(([name, t]) => [name, [...t.data]]));
}

async function transferred(session: InferenceSession, values: Float32Array, slices: number): Promise<Record<string, number[]>> {
  const { outputs } = await session.run({ input: { data: values.slice(), dims: [slices, 1, 128, 128] } });
  return copies(outputs);
}

describe.each([
  ['the bundled detector', join(MODEL_DIR, 'model.onnx')],
  ['the example segmenter', join(REPO_ROOT, 'example-models', 'mia-example-segmenter', 'model.onnx')],
])('%s in its worker', (_name, modelPath) => {
  let session: InferenceSession;

  beforeAll(async () => {
    session = await startWorkerSession({ modelPath, intraOpThreads: 1, interOpThreads: 1 });
  });

  afterAll(async () => {
    await session?.release();
  });

  it('gives the same outputs for a batch in a shared area as for one transferred, run after run', async () => {
    for (const [slices, seed] of [
      [2, 11],
      [4, 12],
      [8, 13],
      [8, 14],
      [3, 15],
    ] as const) {
      const values = batchValues(slices, seed);
      const expected = await transferred(session, values, slices);
      const area = session.inputArea(slices * PLANE);
      area.data.set(values);
      const { outputs } = await session.run({ input: { data: area.data, dims: [slices, 1, 128, 128] } });
      expect(copies(outputs)).toEqual(expected);
      area.release();
    }
  });

  it('writes the outputs into the area instead of new buffers', async () => {
    const area = session.inputArea(8 * PLANE);
    area.data.set(batchValues(8, 21));
    const { outputs } = await session.run({ input: { data: area.data, dims: [8, 1, 128, 128] } });
    for (const t of Object.values(outputs)) expect(t.data.buffer).toBe(area.data.buffer);
    area.release();
  });

  it('hands out a released area again, never a busy one, and keeps batches in flight apart', async () => {
    const first = session.inputArea(8 * PLANE);
    const second = session.inputArea(8 * PLANE);
    expect(second.data.buffer).not.toBe(first.data.buffer);
    const a = batchValues(8, 31);
    const b = batchValues(8, 32);
    const [expectA, expectB] = [await transferred(session, a, 8), await transferred(session, b, 8)];
    first.data.set(a);
    second.data.set(b);
    // Both in the worker's queue at once: each run's outputs land in its own area.
    const [ra, rb] = await Promise.all([
      session.run({ input: { data: first.data, dims: [8, 1, 128, 128] } }),
      session.run({ input: { data: second.data, dims: [8, 1, 128, 128] } }),
    ]);
    expect(copies(ra.outputs)).toEqual(expectA);
    expect(copies(rb.outputs)).toEqual(expectB);
    second.release();
    // Eight at once take every free area large enough, the one just released among them.
    const taken = Array.from({ length: 8 }, () => session.inputArea(4 * PLANE));
    const buffers = new Set(taken.map((t) => t.data.buffer));
    expect(buffers.size).toBe(8);
    expect(buffers.has(first.data.buffer)).toBe(false);
    expect(buffers.has(second.data.buffer)).toBe(true);
    first.release();
    for (const t of taken) t.release();
  });
});

/** An ONNX graph whose one output is its input four times over, along the channel axis. */
const WIDE_MODEL = `
import sys, onnx
from onnx import TensorProto, helper as h
x = h.make_tensor_value_info('input', TensorProto.FLOAT, ['N', 1, 128, 128])
y = h.make_tensor_value_info('wide', TensorProto.FLOAT, ['N', 4, 128, 128])
graph = h.make_graph([h.make_node('Concat', ['input'] * 4, ['wide'], axis=1)], 'wide', [x], [y])
model = h.make_model(graph, opset_imports=[h.make_opsetid('', 13)])
model.ir_version = 8
onnx.save(model, sys.argv[1])
`;

describe('a model whose outputs outgrow the room left in the area', () => {
  let dir: string;
  let session: InferenceSession;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'mia-worker-session-'));
    const modelPath = join(dir, 'wide.onnx');
    await python(['-c', WIDE_MODEL, modelPath]);
    session = await startWorkerSession({ modelPath, intraOpThreads: 1, interOpThreads: 1 });
  });

  afterAll(async () => {
    await session?.release();
    rmSync(dir, { recursive: true, force: true });
  });

  it('sends them back in their own buffers on the first run, then leaves room for them', async () => {
    const values = batchValues(8, 41);
    const expected = Array.from({ length: 8 }, (_, n) => Array.from({ length: 4 }, () => [...values.subarray(n * PLANE, (n + 1) * PLANE)]).flat()).flat();
    for (const inArea of [false, true]) {
      const area = session.inputArea(8 * PLANE);
      area.data.set(values);
      const { outputs } = await session.run({ input: { data: area.data, dims: [8, 1, 128, 128] } });
      const wide = outputs.wide as Tensor;
      expect(wide.dims).toEqual([8, 4, 128, 128]);
      expect(wide.data.buffer === area.data.buffer).toBe(inArea);
      expect([...wide.data]).toEqual(expected);
      area.release();
    }
  });
});
