/**
 * Bring-your-own decodings on hand-made tensors: YOLO-style box tensors in both layouts, box
 * formats and units, with and without objectness; slice classifiers with softmax, sigmoid and a
 * background class; and the manifest schema refusing what the decoders cannot read, by field.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { aggregateForOutput, localizationOf } from '#server/analysis/aggregate.ts';
import { decodeOutputs, type Tensor } from '#server/analysis/decode.ts';
import { loadManifest, verifyModelFile, type Manifest } from '#server/analysis/manifest.ts';
import { manifestIssues, REPO_ROOT } from './helpers.ts';

const EXAMPLES = join(REPO_ROOT, 'example-models');
const input: Manifest['input'] = {
  tensor: 'input',
  shape: ['N', 1, 100, 100],
  dtype: 'float32',
  channels: 1,
  size: { height: 100, width: 100 },
  resampling: { method: 'bilinear', align: 'half_pixel', antialias: false, keep_aspect: false },
  normalisation: { CT: { kind: 'window', center: 40, width: 80, clip: [0, 1] } },
  order: 'normalise_then_resize',
};
const label = (name: string, threshold: number): Manifest['labels'][number] => ({
  label: name,
  display_name: name,
  definition: 'd',
  code: { system: 'SNOMED CT', value: '1', meaning: 'm', provisional: true },
  threshold,
  urgency: 'routine',
});
const labels = [label('mass', 0.5), label('bleed', 0.5)];
type YoloSpec = Extract<Manifest['output'], { decoding: 'yolo' }>;
const yolo = (over: Partial<YoloSpec> = {}): YoloSpec => ({
  decoding: 'yolo',
  tensor: 'boxes',
  layout: 'boxes_last',
  box_format: 'cxcywh',
  box_units: 'input_pixels',
  objectness: false,
  score_activation: 'sigmoid_applied',
  channels: ['mass', 'bleed'],
  nms_iou: 0.5,
  max_detections: 10,
  class_agnostic_nms: false,
  aggregation: { link_iou: 0.2, max_slice_gap: 1 },
  ...over,
});

/** Candidates as rows [box(4), obj?, scores...] -> the tensor in the given layout, one image. */
function boxesTensor(rows: number[][], layout: 'boxes_last' | 'boxes_first'): Tensor {
  const k = rows.length;
  const v = rows[0]!.length;
  const data = new Float32Array(k * v);
  rows.forEach((row, i) => row.forEach((value, j) => (data[layout === 'boxes_last' ? i * v + j : j * k + i] = value)));
  return { data, dims: layout === 'boxes_last' ? [1, k, v] : [1, v, k] };
}

const image = [{ rows: 200, columns: 400 }];

describe('yolo decoding', () => {
  it('reads both layouts the same, scales input pixels back to the image and keeps the best class', () => {
    const rows = [
      [50, 50, 20, 10, 0.9, 0.1], // mass 0.9
      [20, 20, 10, 10, 0.2, 0.3], // below both thresholds
      [80, 30, 10, 20, 0.1, 0.7], // bleed 0.7
    ];
    for (const layout of ['boxes_last', 'boxes_first'] as const) {
      const out = decodeOutputs({ boxes: boxesTensor(rows, layout) }, { input, labels, output: yolo({ layout }) }, image);
      expect(out[0]).toEqual([
        { label: 'mass', confidence: expect.closeTo(0.9, 6), box: { x: 160, y: 90, width: 80, height: 20 } },
        { label: 'bleed', confidence: expect.closeTo(0.7, 6), box: { x: 300, y: 40, width: 40, height: 40 } },
      ]);
    }
  });

  it('xyxy boxes in normalized units, objectness times class score, logits through a sigmoid', () => {
    const logit = (p: number) => Math.log(p / (1 - p));
    const rows = [
      [0.25, 0.5, 0.5, 0.75, logit(0.8), logit(0.9), logit(0.1)], // 0.72 mass
      [0.1, 0.1, 0.2, 0.2, logit(0.5), logit(0.9), logit(0.1)], // 0.45: below 0.5
    ];
    const spec = yolo({ box_format: 'xyxy', box_units: 'normalized', objectness: true, score_activation: 'logits' });
    const [found] = decodeOutputs({ boxes: boxesTensor(rows, 'boxes_last') }, { input, labels, output: spec }, image);
    expect(found).toHaveLength(1);
    expect(found![0]!.confidence).toBeCloseTo(0.72, 5);
    expect(found![0]!.box.x).toBeCloseTo(100, 4);
    expect(found![0]!.box.y).toBeCloseTo(100, 4);
    expect(found![0]!.box.width).toBeCloseTo(100, 4);
    expect(found![0]!.box.height).toBeCloseTo(50, 4);
  });

  it('suppresses overlaps per label, or across labels when class_agnostic_nms', () => {
    const rows = [
      [50, 50, 20, 20, 0.9, 0.1],
      [51, 50, 20, 20, 0.8, 0.1], // same mass, lower: suppressed
      [50, 51, 20, 20, 0.1, 0.7], // a bleed on the same place
    ];
    const t = { boxes: boxesTensor(rows, 'boxes_last') };
    expect(decodeOutputs(t, { input, labels, output: yolo() }, image)[0]!.map((d) => d.label)).toEqual(['mass', 'bleed']);
    expect(decodeOutputs(t, { input, labels, output: yolo({ class_agnostic_nms: true }) }, image)[0]!.map((d) => d.label)).toEqual(['mass']);
  });

  it('drops NaN scores and degenerate boxes; a tensor of the wrong shape is an error naming the layout', () => {
    const rows = [
      [50, 50, 20, 20, Number.NaN, 0.1],
      [50, 50, 0, 20, 0.9, 0.1],
    ];
    expect(decodeOutputs({ boxes: boxesTensor(rows, 'boxes_last') }, { input, labels, output: yolo() }, image)[0]).toEqual([]);
    const wrong = boxesTensor([[50, 50, 20, 20, 0.9]], 'boxes_last');
    expect(() => decodeOutputs({ boxes: wrong }, { input, labels, output: yolo() }, image)).toThrow(/output\.layout boxes_last expects 6 values per box/);
    expect(() => decodeOutputs({ other: wrong }, { input, labels, output: yolo() }, image)).toThrow(/model output boxes missing/);
  });
});

describe('classifier decoding', () => {
  type ClassifierSpec = Extract<Manifest['output'], { decoding: 'classifier' }>;
  const spec = (over: Partial<ClassifierSpec> = {}): ClassifierSpec => ({ decoding: 'classifier', tensor: 'scores', score_activation: 'sigmoid_applied', channels: ['mass', 'bleed'], ...over });
  const sizes = [0, 1, 2, 3].map(() => ({ rows: 64, columns: 48 }));

  it('series score = max over slices on its key slice, the whole image as location', () => {
    // Four slices, two labels: mass peaks on slice 2, bleed never reaches 0.5.
    const scores: Tensor = { data: new Float32Array([0.1, 0.2, 0.6, 0.3, 0.9, 0.4, 0.55, 0.1]), dims: [4, 2] };
    const output = spec();
    const perSlice = decodeOutputs({ scores }, { input, labels, output }, sizes);
    const findings = aggregateForOutput(perSlice, output);
    expect(findings).toEqual([
      {
        label: 'mass',
        confidence: expect.closeTo(0.9, 6),
        slice_index: 2,
        box: { x: 0, y: 0, width: 48, height: 64 },
        first_slice: 1,
        last_slice: 3,
        slice_count: 3,
        detection: { label: 'mass', confidence: expect.closeTo(0.9, 6), box: { x: 0, y: 0, width: 48, height: 64 } },
      },
    ]);
    expect(localizationOf(output)).toBe('image');
    expect(localizationOf(yolo())).toBe('box');
  });

  it('softmax logits with a background column: the background is never reported', () => {
    // Columns: mass, background, bleed. Slice 0 is background; slice 1 mass.
    const scores: Tensor = { data: new Float32Array([0, 5, 0, 4, 0, 0]), dims: [2, 3] };
    const output = spec({ score_activation: 'softmax_logits', background_index: 1 });
    const perSlice = decodeOutputs({ scores }, { input, labels, output }, sizes.slice(0, 2));
    expect(perSlice[0]).toEqual([]);
    expect(perSlice[1]!.map((d) => d.label)).toEqual(['mass']);
    expect(perSlice[1]![0]!.confidence).toBeCloseTo(Math.exp(4) / (Math.exp(4) + 2), 5);
  });

  it('refuses a tensor without a column per channel (plus background)', () => {
    const scores: Tensor = { data: new Float32Array(4), dims: [2, 2] };
    expect(() => decodeOutputs({ scores }, { input, labels, output: spec({ score_activation: 'softmax_applied', background_index: 0 }) }, sizes.slice(0, 2))).toThrow(
      /expected dims \[2, 3\] \(2 channels \+ background\), got \[2, 2\]/,
    );
  });
});

describe('example model manifests and the schema of the new decodings', () => {
  async function example(id: string): Promise<Record<string, unknown>> {
    return JSON.parse(await readFile(join(EXAMPLES, id, 'manifest.json'), 'utf8')) as Record<string, unknown>;
  }

  it('both example models validate, match their files, stay under 1 MB and say NOT FOR CLINICAL USE', async () => {
    for (const id of ['mia-example-yolo', 'mia-example-classifier']) {
      const dir = join(EXAMPLES, id);
      const m = await loadManifest(dir);
      expect(m.not_for_clinical_use).toBe(true);
      expect(m.name).toContain('NOT FOR CLINICAL USE');
      expect(m.file.bytes).toBeLessThan(1024 * 1024);
      await expect(verifyModelFile(dir, m)).resolves.toBe(join(dir, 'model.onnx'));
      expect(await readFile(join(dir, 'README.md'), 'utf8')).toContain('NOT FOR CLINICAL USE');
    }
  });

  it('refuses bad yolo fields by name', async () => {
    const base = await example('mia-example-yolo');
    const output = base.output as Record<string, unknown>;
    expect(manifestIssues({ ...base, output: { ...output, layout: 'anchors_first' } })).toEqual([expect.stringMatching(/^output\.layout: /)]);
    expect(manifestIssues({ ...base, output: { ...output, box_format: 'xywh' } })).toEqual([expect.stringMatching(/^output\.box_format: /)]);
    expect(manifestIssues({ ...base, output: { ...output, box_units: 'cells' } })).toEqual([expect.stringMatching(/^output\.box_units: /)]);
    expect(manifestIssues({ ...base, output: { ...output, tensor: undefined } })).toEqual([expect.stringMatching(/^output\.tensor: /)]);
    expect(manifestIssues({ ...base, output: { ...output, channels: ['no_such_label'] } })).toContain('output.channels[0]: no_such_label is not in labels');
  });

  it('refuses a classifier background column that cannot exist or has no softmax', async () => {
    const base = await example('mia-example-classifier');
    const output = base.output as Record<string, unknown>;
    expect(manifestIssues({ ...base, output: { ...output, background_index: 2 } })).toEqual([expect.stringMatching(/^output\.background_index: expected at most 1/)]);
    expect(manifestIssues({ ...base, output: { ...output, score_activation: 'sigmoid_applied' } })).toEqual(['output.background_index: a background class needs softmax scores']);
    expect(manifestIssues({ ...base, output: { ...output, decoding: 'heatmaps' } })).toEqual([expect.stringMatching(/^output\.decoding: /)]);
  });
});

describe('yolo decoding of a large export', () => {
  it('keeps the best candidates of 8,400 (a YOLOv8 grid) and their boxes', () => {
    // 8,400 separate boxes in a 2,100 x 4 layout, scores rising with k: only the top ones survive.
    const k = 8400;
    const rows = Array.from({ length: k }, (_, i) => [10 + (i % 2100) * 40, 10 + Math.floor(i / 2100) * 40, 20, 20, 0.5 + (0.49 * i) / k, 0]);
    const spec = yolo({ layout: 'boxes_first', max_detections: 5 });
    const big = { input: { ...input, size: { height: 200, width: 84_000 } }, labels, output: spec };
    const [found] = decodeOutputs({ boxes: boxesTensor(rows, 'boxes_first') }, big, [{ rows: 200, columns: 84_000 }]);
    expect(found).toHaveLength(5);
    expect(found![0]!.confidence).toBeCloseTo(0.5 + (0.49 * (k - 1)) / k, 5);
    expect(found![0]!.box).toEqual({ x: (10 + ((k - 1) % 2100) * 40) - 10, y: 10 + Math.floor((k - 1) / 2100) * 40 - 10, width: 20, height: 20 });
  });
});
