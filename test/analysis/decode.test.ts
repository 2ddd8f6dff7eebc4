import { describe, expect, it } from 'vitest';
import { aggregateFindings, aggregateForOutput, decodeThresholdsFor } from '#server/analysis/aggregate.ts';
import { clampBox, decodeOutputs, type Tensor } from '#server/analysis/decode.ts';
import type { Manifest } from '#server/analysis/manifest.ts';
import { iou, nmsPerLabel, type Detection } from '#server/analysis/nms.ts';
import { recommend, recommendFromVerdicts } from '#server/analysis/recommend.ts';

// A miniature manifest: input 16x16, stride 4 -> 4x4 output cells, two labels.
const manifest: Pick<Manifest, 'input' | 'output' | 'labels'> = {
  input: {
    tensor: 'input',
    shape: ['N', 1, 16, 16],
    dtype: 'float32',
    channels: 1,
    size: { height: 16, width: 16 },
    resampling: { method: 'bilinear', align: 'half_pixel', antialias: false, keep_aspect: false },
    normalisation: { CT: { kind: 'window', center: 40, width: 80, clip: [0, 1] } },
    order: 'normalise_then_resize',
  },
  output: {
    decoding: 'centernet',
    stride: 4,
    tensors: { heatmap: 'heatmap', size: 'size', offset: 'offset' },
    heatmap_activation: 'sigmoid_applied',
    size_units: 'input_pixels',
    offset_units: 'cells',
    channels: ['tumor_detected', 'hemorrhage_detected'],
    peak_kernel: 3,
    nms_iou: 0.3,
    max_detections: 10,
    aggregation: { link_iou: 0.2, max_slice_gap: 1 },
  },
  labels: [
    { label: 'tumor_detected', display_name: 'T', definition: 'd', code: { system: 'SNOMED CT', value: '1', meaning: 'm', provisional: true }, threshold: 0.5, urgency: 'soon' },
    { label: 'hemorrhage_detected', display_name: 'H', definition: 'd', code: { system: 'SNOMED CT', value: '2', meaning: 'm', provisional: true }, threshold: 0.6, urgency: 'urgent' },
  ],
};

type Cell = { b: number; c: number; y: number; x: number; score: number; w: number; h: number; ox: number; oy: number };

function tensors(n: number, cells: readonly Cell[]): Record<string, Tensor> {
  const hw = 16;
  const heat = new Float32Array(n * 2 * hw);
  const size = new Float32Array(n * 2 * hw);
  const offset = new Float32Array(n * 2 * hw);
  for (const k of cells) {
    const i = k.y * 4 + k.x;
    heat[(k.b * 2 + k.c) * hw + i] = k.score;
    size[k.b * 2 * hw + i] = k.w;
    size[k.b * 2 * hw + hw + i] = k.h;
    offset[k.b * 2 * hw + i] = k.ox;
    offset[k.b * 2 * hw + hw + i] = k.oy;
  }
  return {
    heatmap: { data: heat, dims: [n, 2, 4, 4] },
    size: { data: size, dims: [n, 2, 4, 4] },
    offset: { data: offset, dims: [n, 2, 4, 4] },
  };
}

describe('decodeOutputs', () => {
  it('maps a peak to a box in original pixels, undoing the resize', () => {
    // Peak at cell (x=1, y=2) with offset (0.5, 0.25): centre (6, 9) in the 16x16 input,
    // size 4x8 -> box (4, 5, 4, 8) in input pixels; a 64x32 (rows x cols) original scales
    // x by 2 and y by 4.
    const out = tensors(1, [{ b: 0, c: 0, y: 2, x: 1, score: 0.9, w: 4, h: 8, ox: 0.5, oy: 0.25 }]);
    const [dets] = decodeOutputs(out, manifest, [{ rows: 64, columns: 32 }]);
    expect(dets).toHaveLength(1);
    expect(dets![0]!.label).toBe('tumor_detected');
    expect(dets![0]!.confidence).toBeCloseTo(0.9, 6);
    expect(dets![0]!.box).toEqual({ x: 8, y: 20, width: 8, height: 32 });
  });

  it('applies per-label thresholds (>=) and keeps only local maxima', () => {
    const out = tensors(1, [
      { b: 0, c: 0, y: 0, x: 0, score: 0.55, w: 2, h: 2, ox: 0.5, oy: 0.5 },
      { b: 0, c: 0, y: 0, x: 1, score: 0.7, w: 2, h: 2, ox: 0.5, oy: 0.5 }, // neighbour wins
      { b: 0, c: 1, y: 3, x: 3, score: 0.55, w: 2, h: 2, ox: 0.5, oy: 0.5 }, // below 0.6
      { b: 0, c: 1, y: 3, x: 0, score: 0.6, w: 2, h: 2, ox: 0.5, oy: 0.5 }, // exactly 0.6
    ]);
    const [dets] = decodeOutputs(out, manifest, [{ rows: 16, columns: 16 }]);
    expect(dets!.map((d) => [d.label, Number(d.confidence.toFixed(2))])).toEqual([
      ['tumor_detected', 0.7],
      ['hemorrhage_detected', 0.6],
    ]);
    const [lower] = decodeOutputs(out, manifest, [{ rows: 16, columns: 16 }], { thresholds: { hemorrhage_detected: 0.5 } });
    expect(lower!.filter((d) => d.label === 'hemorrhage_detected')).toHaveLength(2);
  });

  it('decodes each image of a batch against its own size', () => {
    const out = tensors(2, [
      { b: 0, c: 0, y: 1, x: 1, score: 0.8, w: 4, h: 4, ox: 0.5, oy: 0.5 },
      { b: 1, c: 1, y: 1, x: 1, score: 0.8, w: 4, h: 4, ox: 0.5, oy: 0.5 },
    ]);
    const dets = decodeOutputs(out, manifest, [
      { rows: 16, columns: 16 },
      { rows: 32, columns: 32 },
    ]);
    expect(dets[0]!.map((d) => d.label)).toEqual(['tumor_detected']);
    expect(dets[0]![0]!.box).toEqual({ x: 4, y: 4, width: 4, height: 4 });
    expect(dets[1]!.map((d) => d.label)).toEqual(['hemorrhage_detected']);
    expect(dets[1]![0]!.box).toEqual({ x: 8, y: 8, width: 8, height: 8 });
  });

  it('handles logit heatmaps and sizes in cells', () => {
    const out = tensors(1, [{ b: 0, c: 0, y: 1, x: 1, score: 2, w: 1, h: 2, ox: 0.5, oy: 0.5 }]);
    const logits = { ...manifest, output: { ...manifest.output, heatmap_activation: 'logits' as const, size_units: 'cells' as const } };
    const [dets] = decodeOutputs(out, logits, [{ rows: 16, columns: 16 }]);
    expect(dets![0]!.confidence).toBeCloseTo(1 / (1 + Math.exp(-2)), 6);
    expect(dets![0]!.box).toEqual({ x: 4, y: 2, width: 4, height: 8 });
  });

  it('refuses tensors whose shape does not match the manifest', () => {
    const out = tensors(1, []);
    expect(() => decodeOutputs(out, manifest, [{ rows: 16, columns: 16 }, { rows: 16, columns: 16 }])).toThrow(/heatmap: expected dims \[2, 2, 4, 4\]/);
    expect(() => decodeOutputs({ heatmap: out.heatmap!, size: out.size! }, manifest, [{ rows: 16, columns: 16 }])).toThrow(/output offset missing/);
  });

  it('clampBox keeps a box inside its frame', () => {
    expect(clampBox({ x: -2, y: 5, width: 10, height: 20 }, { rows: 16, columns: 6 })).toEqual({ x: 0, y: 5, width: 6, height: 11 });
  });
});

const det = (label: string, confidence: number, x: number, y: number, w = 10, h = 10): Detection => ({
  label,
  confidence,
  box: { x, y, width: w, height: h },
});

describe('nms', () => {
  it('iou of identical, disjoint and half-overlapping boxes', () => {
    expect(iou({ x: 0, y: 0, width: 10, height: 10 }, { x: 0, y: 0, width: 10, height: 10 })).toBe(1);
    expect(iou({ x: 0, y: 0, width: 10, height: 10 }, { x: 20, y: 0, width: 10, height: 10 })).toBe(0);
    expect(iou({ x: 0, y: 0, width: 10, height: 10 }, { x: 5, y: 0, width: 10, height: 10 })).toBeCloseTo(50 / 150, 10);
  });

  it('suppresses overlapping boxes of the same label only', () => {
    const kept = nmsPerLabel(
      [det('a', 0.6, 1, 0), det('a', 0.9, 0, 0), det('b', 0.8, 0, 0), det('a', 0.5, 30, 30), det('a', 0.4, 5, 0)],
      0.3,
    );
    expect(kept.map((d) => [d.label, d.confidence])).toEqual([
      ['a', 0.9],
      ['b', 0.8],
      ['a', 0.5],
    ]);
    // 0.4 at x=5 overlaps the 0.9 box by 1/3 > 0.3: gone; the cap keeps the best two.
    expect(nmsPerLabel([det('a', 0.1, 0, 0), det('b', 0.3, 0, 0), det('c', 0.2, 0, 0)], 0.3, 2).map((d) => d.label)).toEqual(['b', 'c']);
  });
});

describe('aggregateFindings', () => {
  const spec = { link_iou: 0.2, max_slice_gap: 1 };

  it('links a lesion across adjacent slices and reports its most confident slice', () => {
    const findings = aggregateFindings(
      [[det('t', 0.5, 10, 10)], [det('t', 0.9, 11, 10)], [det('t', 0.7, 12, 11)], []],
      spec,
    );
    expect(findings).toEqual([
      { label: 't', confidence: 0.9, slice_index: 1, box: { x: 11, y: 10, width: 10, height: 10 }, first_slice: 0, last_slice: 2, slice_count: 3, detection: expect.objectContaining({ confidence: 0.9 }) },
    ]);
  });

  it('bridges one missed slice but not two', () => {
    const one = aggregateFindings([[det('t', 0.5, 10, 10)], [], [det('t', 0.6, 10, 10)]], spec);
    expect(one).toHaveLength(1);
    const two = aggregateFindings([[det('t', 0.5, 10, 10)], [], [], [det('t', 0.6, 10, 10)]], spec);
    expect(two).toHaveLength(2);
  });

  it('keeps different labels, distant boxes and same-slice boxes apart', () => {
    const findings = aggregateFindings(
      [
        [det('t', 0.8, 10, 10), det('h', 0.7, 10, 10), det('t', 0.6, 50, 50)],
        [det('t', 0.75, 11, 11), det('t', 0.65, 12, 12)],
      ],
      spec,
    );
    // Slice 1's two tumour boxes cannot both join the slice-0 tumour at (10,10): the better
    // overlap joins it, the other starts a new finding.
    expect(findings.map((f) => [f.label, f.confidence, f.slice_count])).toEqual([
      ['t', 0.8, 2],
      ['h', 0.7, 1],
      ['t', 0.65, 1],
      ['t', 0.6, 1],
    ]);
  });

  it('returns nothing for no detections', () => {
    expect(aggregateFindings([[], []], spec)).toEqual([]);
  });

  describe('scored by the mean of the two most confident slices', () => {
    const top2 = { ...spec, score: 'top2_mean' as const, support_threshold: 0.05 };
    const output = { ...manifest.output, aggregation: top2 };
    const round = (x: number): number => Math.round(x * 1000) / 1000;

    it('scores a lesion on three slices by its best two, and one seen on one slice alone by half', () => {
      const findings = aggregateFindings([[det('t', 0.4, 10, 10), det('t', 0.9, 60, 60)], [det('t', 0.8, 11, 10)], [det('t', 0.6, 12, 11)]], top2);
      expect(findings.map((f) => [round(f.confidence), f.slice_index, f.slice_count])).toEqual([
        [0.7, 1, 3],
        [0.45, 0, 1],
      ]);
      // The key slice and its box stay the most confident slice's.
      expect(findings[0]?.box).toEqual({ x: 11, y: 10, width: 10, height: 10 });
    });

    it('decodes slices down to the support threshold and keeps findings that score their label\'s threshold', () => {
      expect(decodeThresholdsFor(output, { t: 0.5, h: 0.03 })).toEqual({ t: 0.05, h: 0.03 });
      // A detector scored by its best slice decodes at the thresholds themselves.
      expect(decodeThresholdsFor(manifest.output, { t: 0.5 })).toEqual({ t: 0.5 });
      const perSlice = [[det('t', 0.9, 10, 10), det('h', 0.7, 50, 50)], [det('t', 0.2, 10, 10)], [det('h', 0.1, 50, 50)]];
      // t: (0.9 + 0.2) / 2 = 0.55 kept at 0.5; h: (0.7 + 0.1) / 2 = 0.4 dropped at 0.5, though its best slice passes it.
      expect(aggregateForOutput(perSlice, output, { t: 0.5, h: 0.5 }).map((f) => [f.label, round(f.confidence)])).toEqual([['t', 0.55]]);
      expect(aggregateForOutput(perSlice, output).map((f) => f.label)).toEqual(['t', 'h']);
    });
  });
});

describe('recommend', () => {
  const recommendations = {
    rules: [
      { label: 'hemorrhage_detected', min_confidence: 0.5, text: 'urgent' },
      { label: 'infarct_detected', min_confidence: 0.5, text: 'dwi', advice: 'confirm with dwi', modalities: ['CT' as const] },
      { label: 'infarct_detected', min_confidence: 0.5, text: 'adc', modalities: ['MR' as const] },
      { label: 'tumor_detected', min_confidence: 0.5, text: 'mr' },
    ],
    none_found: 'routine',
  };
  it('the model suggestion names every label found above its rule, the most urgent first, for the modality', () => {
    expect(recommend([{ label: 'tumor_detected', confidence: 0.9 }, { label: 'hemorrhage_detected', confidence: 0.6 }], recommendations, 'CT')).toBe('urgent mr');
    expect(recommend([{ label: 'hemorrhage_detected', confidence: 0.4 }, { label: 'tumor_detected', confidence: 0.5 }], recommendations, 'CT')).toBe('mr');
    expect(recommend([{ label: 'infarct_detected', confidence: 0.8 }], recommendations, 'CT')).toBe('dwi');
    expect(recommend([{ label: 'infarct_detected', confidence: 0.8 }], recommendations, 'MR')).toBe('adc');
    expect(recommend([], recommendations, 'CT')).toBe('routine');
  });

  it('the reader\'s recommendation follows verdicts: every accepted label, never a rejected one', () => {
    const name = (label: string): string => label.replace('_detected', '');
    expect(recommendFromVerdicts([{ label: 'infarct_detected', review: null }], recommendations, 'CT', name)).toBeNull();
    const verdicts = [
      { label: 'infarct_detected', review: 'rejected' as const },
      { label: 'tumor_detected', review: 'accepted' as const },
      { label: 'hemorrhage_detected', review: 'accepted' as const },
    ];
    expect(recommendFromVerdicts(verdicts, recommendations, 'CT', name)).toBe('hemorrhage (accepted on review): urgent tumor (accepted on review): mr');
    expect(recommendFromVerdicts([{ label: 'infarct_detected', review: 'accepted' }], recommendations, 'CT', name)).toBe('infarct (accepted on review): confirm with dwi');
    expect(recommendFromVerdicts([{ label: 'infarct_detected', review: 'accepted' }], recommendations, 'MR', name)).toBe('infarct (accepted on review): adc');
    expect(recommendFromVerdicts([{ label: 'infarct_detected', review: 'rejected' }, { label: 'tumor_detected', review: null }], recommendations, 'CT', name)).toMatch(
      /^No AI finding was accepted on review.* 1 AI finding is not reviewed yet\.$/,
    );
  });
});
