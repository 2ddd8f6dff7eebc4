/**
 * CI smoke test of the training script: one tiny epoch must produce an ONNX model that loads
 * in onnxruntime-node with a dynamic batch and a manifest that validates. Without Debian's
 * python3-torch this fails with an explicit message instead of passing vacuously.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { parseManifest } from '#server/analysis/manifest.ts';
import { MODEL_DIR, PYTHON, python, withTempDir } from './helpers.ts';

describe('train.py --smoke', () => {
  it('trains, exports a valid ONNX model and writes a valid manifest', { timeout: 180_000 }, async () => {
    try {
      await python(['-c', 'import torch, onnx'], 60_000);
    } catch (err) {
      throw new Error(
        `${PYTHON} cannot import torch/onnx, so the training script cannot be checked. ` +
          `Install Debian's packages: apt-get install -y python3-torch python3-onnx. (${(err as Error).message.split('\n')[0]})`,
      );
    }
    await withTempDir(async (dir) => {
      await python([join(MODEL_DIR, 'train.py'), '--smoke', '--out', dir], 170_000);
      const manifest = parseManifest(JSON.parse(await readFile(join(dir, 'manifest.json'), 'utf8')));
      expect(manifest.not_for_clinical_use).toBe(true);
      const session = await ort.InferenceSession.create(join(dir, manifest.file.path), { executionProviders: ['cpu'], intraOpNumThreads: 2 });
      try {
        const { height, width } = manifest.input.size;
        const input = new ort.Tensor('float32', new Float32Array(3 * height * width), [3, 1, height, width]);
        const out = await session.run({ [manifest.input.tensor]: input });
        const output = manifest.output;
        if (output.decoding !== 'centernet') throw new Error(`train.py writes a centernet manifest, got ${output.decoding}`);
        const stride = output.stride;
        expect(out[output.tensors.heatmap]?.dims).toEqual([3, output.channels.length, height / stride, width / stride]);
        expect(out[output.tensors.size]?.dims).toEqual([3, 2, height / stride, width / stride]);
      } finally {
        await session.release();
      }
      const evaluation = JSON.parse(await readFile(join(dir, 'evaluation.json'), 'utf8')) as { smoke: boolean };
      expect(evaluation.smoke).toBe(true);
    });
  });
});
