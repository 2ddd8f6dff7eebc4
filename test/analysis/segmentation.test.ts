/**
 * The segmentation decoder on hand-made tensors: components (8-connectivity), thresholds,
 * activations, masks scaled to the image, and hostile tensors (wrong dims, NaN, huge planes).
 */
import { describe, expect, it } from 'vitest';
import { forEachMaskSpan, maskArea, maskProblem, type RleMask } from '#common/rle-mask.ts';
import { aggregateFindings } from '#server/analysis/aggregate.ts';
import type { Tensor } from '#server/analysis/decode.ts';
import type { Manifest, SegmentationOutputSpec } from '#server/analysis/manifest.ts';
import { decodeSegmentation, type Region } from '#server/analysis/segmentation.ts';

// Input 16x16, stride 2 -> an 8x8 output plane per label; two labels.
const base: Pick<Manifest, 'input' | 'labels'> & { output: SegmentationOutputSpec } = {
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
    decoding: 'segmentation',
    tensor: 'masks',
    activation: 'sigmoid_applied',
    stride: 2,
    channels: ['tumor_detected', 'hemorrhage_detected'],
    confidence: 'mean',
    min_region_px: 0,
    max_regions: 10,
    aggregation: { link_iou: 0.2, max_slice_gap: 1 },
  },
  labels: [
    { label: 'tumor_detected', display_name: 'T', definition: 'd', code: { system: 'SNOMED CT', value: '1', meaning: 'm', provisional: true }, threshold: 0.5, urgency: 'soon' },
    { label: 'hemorrhage_detected', display_name: 'H', definition: 'd', code: { system: 'SNOMED CT', value: '2', meaning: 'm', provisional: true }, threshold: 0.6, urgency: 'urgent' },
  ],
};

/** A [n, channels, 8, 8] tensor from drawn planes: one string of 8 rows per (image, channel); digits are tenths. */
function planes(n: number, channels: number, drawn: Record<string, string[]>, side = 8): Tensor {
  const data = new Float32Array(n * channels * side * side);
  for (const [key, rows] of Object.entries(drawn)) {
    const [b, c] = key.split(',').map(Number) as [number, number];
    rows.forEach((row, y) => {
      [...row].forEach((ch, x) => {
        data[((b * channels + c) * side + y) * side + x] = ch === '.' ? 0 : Number(ch) / 10;
      });
    });
  }
  return { data, dims: [n, channels, side, side] };
}

/** The mask as rows of '#' and '.' over its box. */
function draw(mask: RleMask): string[] {
  const rows = Array.from({ length: mask.height }, () => Array.from({ length: mask.width }, () => '.'));
  forEachMaskSpan(mask, (row, first, last) => {
    for (let x = first; x <= last; x++) (rows[row - mask.y] as string[])[x - mask.x] = '#';
  });
  return rows.map((r) => r.join(''));
}

const image16 = { rows: 16, columns: 16 };

describe('decodeSegmentation', () => {
  it('finds one region per 8-connected component, with its box and mask in image pixels', () => {
    const t = planes(1, 2, {
      '0,0': [
        '99......',
        '9.......',
        '.9......', // diagonal: still the same component
        '........',
        '.....77.',
        '.....77.',
        '........',
        '........',
      ],
    });
    const [regions] = decodeSegmentation({ masks: t }, base, [image16]);
    expect(regions).toHaveLength(2);
    const [first, second] = regions as [Region, Region];
    expect(first).toMatchObject({ label: 'tumor_detected', box: { x: 0, y: 0, width: 4, height: 6 }, area_px: 16 });
    expect(first.confidence).toBeCloseTo(0.9);
    expect(draw(first.mask)).toEqual(['####', '####', '##..', '##..', '..##', '..##']);
    expect(second).toMatchObject({ box: { x: 10, y: 8, width: 4, height: 4 }, area_px: 16 });
    expect(second.confidence).toBeCloseTo(0.7);
    expect(maskProblem(first.mask)).toBeNull();
  });

  it("applies each label's threshold (and an override), and 'max' confidence when declared", () => {
    const t = planes(1, 2, { '0,1': ['55......', '58......', '........', '........', '........', '........', '........', '........'] });
    // hemorrhage threshold 0.6: only the 0.8 pixel.
    const [strict] = decodeSegmentation({ masks: t }, base, [image16]);
    expect(strict?.map((r) => [r.label, r.area_px])).toEqual([['hemorrhage_detected', 4]]);
    const [loose] = decodeSegmentation({ masks: t }, { ...base, output: { ...base.output, confidence: 'max' } }, [image16], { thresholds: { hemorrhage_detected: 0.5 } });
    expect(loose?.map((r) => [r.area_px, r.confidence])).toEqual([[16, expect.closeTo(0.8, 5)]]);
  });

  it('scales the mask to an image of another size, cell by pixel centre', () => {
    const t = planes(1, 2, { '0,0': ['........', '.9......', '........', '........', '........', '........', '........', '........'] });
    // 8 cells over 20 columns: 2.5 pixels a cell; cell 1 holds pixel centres 2.5..4.5 -> columns 2..4.
    const [regions] = decodeSegmentation({ masks: t }, base, [{ rows: 12, columns: 20 }]);
    expect(regions?.[0]?.mask).toMatchObject({ x: 2, width: 3, y: 1, height: 2 });
    expect(regions?.[0]?.area_px).toBe(6);
  });

  it('drops regions under min_region_px, and under min_region_mm2 where the image has a spacing', () => {
    const t = planes(1, 2, { '0,0': ['9.......', '........', '........', '...99...', '...99...', '........', '........', '........'] });
    const sized = { ...base, output: { ...base.output, min_region_px: 5 } };
    expect(decodeSegmentation({ masks: t }, sized, [image16])[0]?.map((r) => r.area_px)).toEqual([16]);
    const mm = { ...base, output: { ...base.output, min_region_mm2: 20 } };
    // 0.5 mm pixels: 16 px = 4 mm2, 4 px = 1 mm2: both go; without a spacing both stay.
    expect(decodeSegmentation({ masks: t }, mm, [image16], { spacings: [{ row: 0.5, column: 0.5 }] })[0]).toEqual([]);
    expect(decodeSegmentation({ masks: t }, mm, [image16], { spacings: [null] })[0]).toHaveLength(2);
  });

  it('softmax logits with a background channel: a label wins a pixel only where it beats the rest', () => {
    // Channels: background (0), tumour (1), haemorrhage (2).
    const spec = { ...base, output: { ...base.output, activation: 'softmax' as const, background_channel: 0 } };
    const data = new Float32Array(3 * 64).fill(0);
    data.fill(5, 0, 64); // background everywhere
    data[64 + 9] = 10; // tumour logit at (1, 1)
    data[128 + 9] = 2;
    const [regions] = decodeSegmentation({ masks: { data, dims: [1, 3, 8, 8] } }, spec, [image16]);
    expect(regions?.map((r) => [r.label, r.box])).toEqual([['tumor_detected', { x: 2, y: 2, width: 2, height: 2 }]]);
    expect(regions?.[0]?.confidence).toBeGreaterThan(0.99);
  });

  it('sigmoid logits are squashed before the threshold', () => {
    const spec = { ...base, output: { ...base.output, activation: 'sigmoid' as const } };
    const data = new Float32Array(2 * 64).fill(-10);
    data[0] = 3; // sigmoid 0.95
    data[1] = -0.5; // 0.38: under 0.5
    const [regions] = decodeSegmentation({ masks: { data, dims: [1, 2, 8, 8] } }, spec, [image16]);
    expect(regions?.map((r) => r.area_px)).toEqual([4]);
    expect(regions?.[0]?.confidence).toBeCloseTo(0.9526, 3);
  });

  it('keeps max_regions per image, the most confident first, and decodes each image of a batch', () => {
    const spec = { ...base, output: { ...base.output, max_regions: 2 } };
    const t = planes(2, 2, {
      '0,0': ['6.7.8.9.', '........', '........', '........', '........', '........', '........', '........'],
      '1,1': ['........', '........', '........', '........', '........', '........', '........', '.......9'],
    });
    const [a, b] = decodeSegmentation({ masks: t }, spec, [image16, image16]);
    expect(a?.map((r) => r.confidence)).toEqual([expect.closeTo(0.9, 5), expect.closeTo(0.8, 5)]);
    expect(b?.map((r) => [r.label, r.box])).toEqual([['hemorrhage_detected', { x: 14, y: 14, width: 2, height: 2 }]]);
  });

  it('a plane-filling region is labelled without recursion and encoded in one run per row at most', () => {
    const side = 1024;
    const spec = { ...base, input: { ...base.input, size: { height: side, width: side } }, output: { ...base.output, stride: 1 } };
    const data = new Float32Array(2 * side * side);
    data.fill(0.9, 0, side * side);
    const [regions] = decodeSegmentation({ masks: { data, dims: [1, 2, side, side] } }, spec, [{ rows: side, columns: side }]);
    expect(regions).toHaveLength(1);
    expect(regions?.[0]?.mask.counts).toEqual([0, side * side, 0]);
    expect(maskArea(regions?.[0]?.mask as RleMask)).toBe(side * side);
  });

  it('NaN and infinite values are never inside a region', () => {
    const t = planes(1, 2, { '0,0': ['99......', '........', '........', '........', '........', '........', '........', '........'] });
    t.data[1] = Number.NaN;
    t.data[2] = Number.POSITIVE_INFINITY;
    const [regions] = decodeSegmentation({ masks: t }, base, [image16]);
    expect(regions?.map((r) => [r.box, r.area_px])).toEqual([[{ x: 0, y: 0, width: 2, height: 2 }, 4]]);
    const logits = { ...base, output: { ...base.output, activation: 'softmax' as const, background_channel: 0 } };
    const data = new Float32Array(3 * 64);
    data[64] = Number.NaN;
    data[65] = Number.POSITIVE_INFINITY;
    expect(decodeSegmentation({ masks: { data, dims: [1, 3, 8, 8] } }, logits, [image16])[0]).toEqual([]);
  });

  it('refuses wrong dims, short data, a missing tensor and planes beyond the input size, naming them', () => {
    const t = planes(1, 2, {});
    expect(() => decodeSegmentation({ masks: t }, base, [image16, image16])).toThrow(/masks: expected dims \[2, 2, 8, 8\], got \[1, 2, 8, 8\]/);
    expect(() => decodeSegmentation({ masks: { data: new Float32Array(10), dims: [1, 2, 8, 8] } }, base, [image16])).toThrow(/expected 128 values, got 10/);
    expect(() => decodeSegmentation({ other: t }, base, [image16])).toThrow(/model output masks missing \(have other\)/);
    expect(() => decodeSegmentation({ masks: { data: t.data, dims: [1, 3, 8, 8] } }, base, [image16])).toThrow(/expected dims \[1, 2, 8, 8\]/);
    // Without a declared stride the plane comes from the tensor, within the input size.
    const free = { ...base, output: { ...base.output, stride: undefined } };
    expect(decodeSegmentation({ masks: t }, free, [image16])[0]).toEqual([]);
    const huge = { data: new Float32Array(4), dims: [1, 2, 1e9, 1e9] };
    expect(() => decodeSegmentation({ masks: huge }, free, [image16])).toThrow(/plane \[1000000000, 1000000000\] must be 1..the input size 16 x 16/);
    expect(() => decodeSegmentation({ masks: { data: t.data, dims: [1, 2, 8.5, 8] } }, free, [image16])).toThrow(/must be 1..the input size/);
    expect(() => decodeSegmentation({ masks: { data: t.data, dims: [1, 2, -8, -8] } }, free, [image16])).toThrow(/must be 1..the input size/);
  });

  it('regions link across slices into findings that keep the key slice mask', () => {
    const slice = (v: string) => ['........', '.' + v + v + '.....', '.' + v + v + '.....', '........', '........', '........', '........', '........'];
    const t = planes(3, 2, { '0,0': slice('6'), '1,0': slice('9'), '2,0': slice('7') });
    const perSlice = decodeSegmentation({ masks: t }, base, [image16, image16, image16]);
    const findings = aggregateFindings(perSlice, base.output.aggregation);
    expect(findings).toHaveLength(1);
    expect(findings[0]).toMatchObject({ slice_index: 1, slice_count: 3, box: { x: 2, y: 2, width: 4, height: 4 } });
    expect(findings[0]?.detection.mask).toMatchObject({ x: 2, y: 2, width: 4, height: 4, counts: [0, 16, 0] });
  });
});
