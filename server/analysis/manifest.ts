/**
 * Model manifests: the JSON beside each ONNX file in models/<id>/ that says what the model
 * applies to, how to build its input, how to decode its output and what its labels mean
 * (PRODUCT.md, The model). Any detection model with a valid manifest can replace the bundled one,
 * so the manifest is parsed once here, at the edge, and trusted everywhere after.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { URGENCIES } from '#common/vocabulary.ts';

const UNIT = 'expected number between 0 and 1';
const unitInterval = () => z.number({ error: UNIT }).min(0, { error: UNIT }).max(1, { error: UNIT });
const positiveInt = () => z.number().int().positive();
const nonEmpty = () => z.string().min(1);

const clip = z
  .tuple([z.number(), z.number()])
  .refine(([lo, hi]) => lo < hi, { error: 'expected [low, high] with low < high' });

const windowNormalisation = z.object({
  kind: z.literal('window'),
  center: z.number(),
  width: z.number().positive(),
  clip,
});

const percentileNormalisation = z
  .object({
    kind: z.literal('percentile'),
    low: z.number().min(0).max(100),
    high: z.number().min(0).max(100),
    clip,
  })
  .refine((p) => p.low < p.high, { error: 'expected low < high', path: ['high'] });

const normalisation = z.discriminatedUnion('kind', [windowNormalisation, percentileNormalisation]);
export type Normalisation = z.infer<typeof normalisation>;

const input = z
  .object({
    tensor: nonEmpty(),
    // [N, C, H, W]; N is dynamic (a name such as "N", or null) so a whole scan runs as one batch.
    shape: z.tuple([z.union([z.string(), z.null()]), positiveInt(), positiveInt(), positiveInt()]),
    dtype: z.literal('float32'),
    channels: positiveInt(),
    size: z.object({ height: positiveInt(), width: positiveInt() }),
    resampling: z.object({
      method: z.literal('bilinear'),
      align: z.literal('half_pixel'),
      antialias: z.literal(false),
      keep_aspect: z.literal(false),
    }),
    normalisation: z.record(z.string(), normalisation),
    order: z.literal('normalise_then_resize'),
  })
  .superRefine((v, ctx) => {
    const [, c, h, w] = v.shape;
    if (c !== v.channels) ctx.addIssue({ code: 'custom', path: ['shape', 1], message: `expected ${v.channels} (channels)` });
    if (h !== v.size.height) ctx.addIssue({ code: 'custom', path: ['shape', 2], message: `expected ${v.size.height} (size.height)` });
    if (w !== v.size.width) ctx.addIssue({ code: 'custom', path: ['shape', 3], message: `expected ${v.size.width} (size.width)` });
    if (v.channels !== 1) ctx.addIssue({ code: 'custom', path: ['channels'], message: 'only single-channel models are supported' });
  });
export type InputSpec = z.infer<typeof input>;

/**
 * How a detector's boxes on adjacent slices become one finding and what it scores
 * (server/analysis/aggregate.ts). `top2_mean` with a `support_threshold`: slices are decoded down
 * to it and a finding scores the mean of its two most confident slices.
 */
const aggregation = () =>
  z
    .object({
      link_iou: unitInterval(),
      max_slice_gap: z.number().int().min(0),
      score: z.enum(['max', 'top2_mean']).optional(),
      support_threshold: unitInterval().optional(),
    })
    .superRefine((v, ctx) => {
      if (v.score === 'top2_mean' && v.support_threshold === undefined) {
        ctx.addIssue({ code: 'custom', path: ['support_threshold'], message: 'expected a number: top2_mean decodes slices down to it' });
      }
    });

const centernetOutput = z.object({
  decoding: z.literal('centernet'),
  stride: positiveInt(),
  tensors: z.object({ heatmap: nonEmpty(), size: nonEmpty(), offset: nonEmpty() }),
  heatmap_activation: z.enum(['sigmoid_applied', 'logits']),
  size_units: z.enum(['input_pixels', 'cells']),
  offset_units: z.literal('cells'),
  channels: z.array(nonEmpty()).min(1),
  peak_kernel: positiveInt().refine((k) => k % 2 === 1, { error: 'expected an odd kernel size' }),
  nms_iou: unitInterval(),
  max_detections: positiveInt(),
  aggregation: aggregation(),
});

/**
 * YOLO-family detectors (YOLOv5/v8 style exports): one tensor of candidate boxes, each with its
 * box, an optional objectness and one score per class. Exports differ in axis order, box
 * encoding and units, so the manifest says which; the decoder trusts nothing else about them.
 */
const yoloOutput = z.object({
  decoding: z.literal('yolo'),
  tensor: nonEmpty(),
  /** boxes_last: [N, K, 4+C(+1)] (YOLOv5); boxes_first: [N, 4+C(+1), K] (YOLOv8 export). */
  layout: z.enum(['boxes_last', 'boxes_first']),
  box_format: z.enum(['cxcywh', 'xyxy']),
  box_units: z.enum(['input_pixels', 'normalized']),
  /** true: value 4 is objectness, the class scores follow, and a score is objectness * class. */
  objectness: z.boolean().default(false),
  score_activation: z.enum(['sigmoid_applied', 'logits']),
  channels: z.array(nonEmpty()).min(1),
  nms_iou: unitInterval(),
  max_detections: positiveInt(),
  /** true: boxes of different labels suppress each other too (one label per object). */
  class_agnostic_nms: z.boolean().default(false),
  aggregation: aggregation(),
});
export type YoloOutput = z.infer<typeof yoloOutput>;

/**
 * Slice classifiers: one tensor of scores [N, C]. No box: a series scores the maximum over its
 * slices, on its key slice, and the finding points at that whole image (localization 'image').
 */
const classifierOutput = z
  .object({
    decoding: z.literal('classifier'),
    tensor: nonEmpty(),
    score_activation: z.enum(['sigmoid_applied', 'softmax_applied', 'sigmoid_logits', 'softmax_logits']),
    /** The column of a background ("nothing") class, not reported; absent: none. */
    background_index: z.number().int().min(0).optional(),
    /** The label of each non-background column, in column order. */
    channels: z.array(nonEmpty()).min(1),
  })
  .superRefine((v, ctx) => {
    if (v.background_index !== undefined && v.background_index > v.channels.length) {
      ctx.addIssue({ code: 'custom', path: ['background_index'], message: `expected at most ${v.channels.length} (one column per channel plus the background)` });
    }
    if (v.background_index !== undefined && v.score_activation.startsWith('sigmoid')) {
      ctx.addIssue({ code: 'custom', path: ['background_index'], message: 'a background class needs softmax scores' });
    }
  });
export type ClassifierOutput = z.infer<typeof classifierOutput>;

/** Largest output plane side a segmentation decoder accepts, whatever the tensor says. */
export const MAX_SEGMENTATION_SIDE = 4096;

/**
 * A segmentation model: one tensor [N, C, h, w] of per-class probabilities (or logits); regions
 * are connected pixels above the label's threshold (server/analysis/segmentation.ts).
 */
const segmentationOutput = z
  .object({
    decoding: z.literal('segmentation'),
    tensor: nonEmpty(),
    /** *_applied: the graph already emits probabilities; sigmoid/softmax: logits, applied here. */
    activation: z.enum(['sigmoid_applied', 'softmax_applied', 'sigmoid', 'softmax']),
    /** The tensor channel that is background, if any; `channels` names the others in order. */
    background_channel: z.number().int().min(0).optional(),
    /** Input pixels per output pixel; absent: taken from the tensor's dims (checked against the input size). */
    stride: positiveInt().optional(),
    channels: z.array(nonEmpty()).min(1),
    /** A region's confidence: the mean or the max probability over its pixels. */
    confidence: z.enum(['mean', 'max']),
    /** Smaller regions are dropped: in pixels of the original image, and in mm² when the image has a pixel spacing. */
    min_region_px: z.number().min(0),
    min_region_mm2: z.number().min(0).optional(),
    /** Regions kept per image, the most confident first. */
    max_regions: positiveInt().max(1000),
    aggregation: z.object({ link_iou: unitInterval(), max_slice_gap: z.number().int().min(0) }),
  })
  .superRefine((v, ctx) => {
    const total = v.channels.length + (v.background_channel === undefined ? 0 : 1);
    if (v.background_channel !== undefined && v.background_channel >= total) {
      ctx.addIssue({ code: 'custom', path: ['background_channel'], message: `expected a channel index below ${total} (channels plus background)` });
    }
    if ((v.activation === 'softmax' || v.activation === 'softmax_applied') && total < 2) {
      ctx.addIssue({ code: 'custom', path: ['activation'], message: 'softmax needs at least two channels (add a background_channel)' });
    }
  });
export type SegmentationOutputSpec = z.infer<typeof segmentationOutput>;

const output = z.discriminatedUnion('decoding', [centernetOutput, yoloOutput, classifierOutput, segmentationOutput]);
export type OutputSpec = z.infer<typeof output>;

const code = z.object({
  system: z.enum(['SNOMED CT', 'RadLex']),
  value: nonEmpty(),
  meaning: nonEmpty(),
  // true when the code has not yet been checked against a terminology release.
  provisional: z.boolean(),
});

const label = z.object({
  label: z.string().regex(/^[a-z][a-z0-9_]*$/, { error: 'expected a snake_case label' }),
  display_name: nonEmpty(),
  definition: nonEmpty(),
  code,
  threshold: unitInterval(),
  // How soon a finding of this label needs a reader (worklist triage). Optional so manifests
  // written before triage stay valid: their labels are routine.
  urgency: z.enum(URGENCIES).default('routine'),
});
export type ManifestLabel = z.infer<typeof label>;

const recommendations = z.object({
  rules: z.array(
    z.object({
      label: nonEmpty(),
      min_confidence: unitInterval(),
      /** The model's suggestion when it finds the label ("possible ..."). */
      text: nonEmpty(),
      /** The next step once a reader accepted a finding of the label; reports use it. */
      advice: nonEmpty().optional(),
      /** Only for these modalities (an MR study is not told to get an MR); all when absent. */
      modalities: z.array(z.enum(['CT', 'MR'])).min(1).optional(),
    }),
  ),
  none_found: nonEmpty(),
});
export type Recommendations = z.infer<typeof recommendations>;

const labelMetrics = z.object({
  sensitivity: unitInterval().nullable(),
  false_positives_per_series: z.number().min(0),
  average_precision_iou_0_5: unitInterval().nullable().optional(),
});

/**
 * Platt scaling of a label's confidence (Platt, 1999): p = sigmoid(a * logit(raw) + b), fitted on
 * data the model never trained on, so that "0.8" means about 8 in 10 such findings are real. a > 0
 * keeps the order of findings, so the decoder's peaks, NMS and links are the same as without it.
 */
const plattScaling = z.object({ a: z.number().positive(), b: z.number() });
export type PlattScaling = z.infer<typeof plattScaling>;

const calibration = z.object({
  method: z.literal('platt'),
  /** What it was fitted on, in words (the family, split and count of findings). */
  fitted_on: nonEmpty(),
  per_label: z.record(z.string(), plattScaling),
});
export type Calibration = z.infer<typeof calibration>;

const measuredLabel = z.object({
  lesions: z.number().int().min(0),
  sensitivity: unitInterval().nullable(),
  false_positives_per_series: z.number().min(0),
});

/**
 * A named set of per-label thresholds an admin can choose for the site (e.g. high sensitivity for
 * triage), with what it gave on held-out data so the choice is an informed one.
 */
const operatingPoint = z.object({
  name: z.string().regex(/^[a-z][a-z0-9_]*$/, { error: 'expected a snake_case name' }),
  display_name: nonEmpty(),
  description: nonEmpty(),
  thresholds: z.record(z.string(), unitInterval()),
  measured: z
    .object({
      /** The data the figures are from, in words; thresholds are chosen on other data. */
      on: nonEmpty(),
      series: z.number().int().min(0),
      lesions: z.number().int().min(0),
      sensitivity: unitInterval().nullable(),
      false_positives_per_series: z.number().min(0),
      per_label: z.record(z.string(), measuredLabel),
    })
    .optional(),
});
export type OperatingPoint = z.infer<typeof operatingPoint>;

const frocPoint = z.object({ threshold: unitInterval(), false_positives_per_series: z.number().min(0), sensitivity: unitInterval() });
const reliabilityBin = z.object({
  low: unitInterval(),
  high: unitInterval(),
  count: z.number().int().min(0),
  mean_confidence: unitInterval().nullable(),
  observed: unitInterval().nullable(),
});

/** Figures on a generator the model never saw (npm run eval): the curves the Models screen draws. */
const heldoutMetrics = z.object({
  family: nonEmpty(),
  series: z.number().int().min(0),
  lesions: z.number().int().min(0),
  /** Lesion sensitivity at a given number of false positives per series ("0.25", "0.5", "1", "2"). */
  sensitivity_at: z.record(z.string(), unitInterval().nullable()),
  froc: z.array(frocPoint).max(200),
  reliability: z.array(reliabilityBin).max(50),
  expected_calibration_error: unitInterval(),
  per_label: z.record(z.string(), z.object({ lesions: z.number().int().min(0), sensitivity_at: z.record(z.string(), unitInterval().nullable()) })),
  per_modality: z.record(z.string(), z.object({ series: z.number().int().min(0), lesions: z.number().int().min(0), sensitivity_at: z.record(z.string(), unitInterval().nullable()) })),
});
export type HeldoutMetrics = z.infer<typeof heldoutMetrics>;

/** What a reader must know before trusting the model: the model card's parts the rest lacks. */
const card = z.object({
  limitations: z.array(nonEmpty()).min(1),
  /** Who should use it, where, and what the output is for; defaults to intended_use. */
  users: nonEmpty().optional(),
  references: z.array(nonEmpty()).optional(),
});

export const manifestSchema = z
  .object({
    manifest_version: z.literal(1),
    id: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, { error: 'expected a kebab-case id' }),
    name: nonEmpty(),
    version: z.string().regex(/^\d+\.\d+\.\d+$/, { error: 'expected a semantic version such as 1.0.0' }),
    file: z.object({
      path: nonEmpty().refine((p) => !p.includes('/') && !p.includes('\\') && p !== '..', {
        error: 'expected a file name inside the model folder',
      }),
      sha256: z.string().regex(/^[0-9a-f]{64}$/, { error: 'expected 64 lowercase hex digits' }),
      bytes: positiveInt().optional(),
      format: z.literal('onnx'),
      opset: positiveInt().optional(),
    }),
    intended_use: nonEmpty(),
    not_for_clinical_use: z.boolean(),
    applies_to: z.object({
      modalities: z.array(z.enum(['CT', 'MR'])).min(1),
      body_part: nonEmpty().optional(),
      min_slices: positiveInt(),
      image_types: z.array(nonEmpty()).min(1),
      photometric: z.array(z.enum(['MONOCHROME1', 'MONOCHROME2'])).min(1).optional(),
    }),
    input,
    output,
    labels: z.array(label).min(1),
    recommendations,
    training_data: z.object({ description: nonEmpty() }).catchall(z.unknown()),
    metrics: z
      .object({
        source: nonEmpty(),
        per_label: z.record(z.string(), labelMetrics),
        false_positives_per_series: z.number().min(0),
        expected_calibration_error: unitInterval().optional(),
        heldout: heldoutMetrics.optional(),
      })
      .catchall(z.unknown()),
    /** Applied to every finding's confidence; thresholds are on the calibrated scale. */
    calibration: calibration.optional(),
    operating_points: z.array(operatingPoint).min(1).optional(),
    /** The operating point used until an admin chooses one; labels[].threshold when absent. */
    default_operating_point: nonEmpty().optional(),
    card: card.optional(),
  })
  .superRefine((m, ctx) => {
    const names = m.labels.map((l) => l.label);
    names.forEach((n, i) => {
      if (names.indexOf(n) !== i) ctx.addIssue({ code: 'custom', path: ['labels', i, 'label'], message: `duplicate label ${n}` });
    });
    // The decoder maps heatmap channel i to output.channels[i]; each must have a label entry
    // (for its threshold and glossary), and each label must come from some channel.
    m.output.channels.forEach((c, i) => {
      if (!names.includes(c)) ctx.addIssue({ code: 'custom', path: ['output', 'channels', i], message: `${c} is not in labels` });
    });
    names.forEach((n, i) => {
      if (!m.output.channels.includes(n)) ctx.addIssue({ code: 'custom', path: ['labels', i, 'label'], message: `${n} is not an output channel` });
    });
    m.recommendations.rules.forEach((r, i) => {
      if (!names.includes(r.label)) ctx.addIssue({ code: 'custom', path: ['recommendations', 'rules', i, 'label'], message: `${r.label} is not in labels` });
    });
    for (const label of Object.keys(m.calibration?.per_label ?? {})) {
      if (!names.includes(label)) ctx.addIssue({ code: 'custom', path: ['calibration', 'per_label', label], message: `${label} is not in labels` });
    }
    const points = m.operating_points ?? [];
    points.forEach((p, i) => {
      if (points.findIndex((q) => q.name === p.name) !== i) ctx.addIssue({ code: 'custom', path: ['operating_points', i, 'name'], message: `duplicate operating point ${p.name}` });
      // Every label needs its threshold: a missing one would silently fall back to another point's.
      for (const n of names) {
        if (!(n in p.thresholds)) ctx.addIssue({ code: 'custom', path: ['operating_points', i, 'thresholds'], message: `no threshold for ${n}` });
      }
      for (const label of Object.keys(p.thresholds)) {
        if (!names.includes(label)) ctx.addIssue({ code: 'custom', path: ['operating_points', i, 'thresholds', label], message: `${label} is not in labels` });
      }
    });
    if (m.default_operating_point !== undefined && !points.some((p) => p.name === m.default_operating_point)) {
      ctx.addIssue({ code: 'custom', path: ['default_operating_point'], message: `${m.default_operating_point} is not in operating_points` });
    }
    const out = m.output;
    if (out.decoding === 'segmentation' && out.stride !== undefined) {
      const { height, width } = m.input.size;
      if (height % out.stride !== 0 || width % out.stride !== 0) {
        ctx.addIssue({ code: 'custom', path: ['output', 'stride'], message: `expected a divisor of the input size ${height} x ${width}` });
      }
    }
    m.applies_to.modalities.forEach((mod, i) => {
      if (!(mod in m.input.normalisation)) {
        ctx.addIssue({ code: 'custom', path: ['applies_to', 'modalities', i], message: `no input.normalisation for ${mod}` });
      }
    });
  });

export type Manifest = z.infer<typeof manifestSchema>;

export type ManifestIssue = { path: string; message: string };

export class ManifestError extends Error {
  readonly issues: readonly ManifestIssue[];
  constructor(issues: readonly ManifestIssue[], source?: string) {
    const where = source === undefined ? '' : ` (${source})`;
    super(`invalid model manifest${where}: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`);
    this.name = 'ManifestError';
    this.issues = issues;
  }
}

/** `labels[2].threshold` style, the way a person would point at the field in the JSON. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const key of path) {
    if (typeof key === 'number') out += `[${key}]`;
    else out += out === '' ? String(key) : `.${String(key)}`;
  }
  return out === '' ? '(root)' : out;
}

export function parseManifest(json: unknown, source?: string): Manifest {
  const result = manifestSchema.safeParse(json);
  if (!result.success) {
    throw new ManifestError(
      result.error.issues.map((i) => ({ path: formatPath(i.path), message: i.message })),
      source,
    );
  }
  return result.data;
}

/** Reads and parses `<dir>/manifest.json`. Does not hash the model file; see verifyModelFile. */
export async function loadManifest(dir: string): Promise<Manifest> {
  const path = join(dir, 'manifest.json');
  const text = await readFile(path, 'utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new ManifestError([{ path: '(root)', message: `not valid JSON: ${(err as Error).message}` }], path);
  }
  return parseManifest(json, path);
}

/** The model file's absolute path, after checking its SHA-256 against the manifest, so a
 * swapped or truncated file is refused before it reaches onnxruntime. */
export async function verifyModelFile(dir: string, manifest: Manifest): Promise<string> {
  const path = join(dir, manifest.file.path);
  const digest = createHash('sha256').update(await readFile(path)).digest('hex');
  if (digest !== manifest.file.sha256) {
    throw new ManifestError([{ path: 'file.sha256', message: `does not match ${manifest.file.path} (actual ${digest})` }], path);
  }
  return path;
}
