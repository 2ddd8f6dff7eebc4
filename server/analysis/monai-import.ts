/**
 * MONAI Bundle -> mia model folder. A bundle (MONAI Bundle Specification, "metadata.json File")
 * describes its network's input and output tensors (network_data_format) and, in
 * configs/inference.json, the transforms that scale intensities before the network. mia reads
 * what it can run (a 2D, single-channel slice classifier with a fixed input size, exported to
 * ONNX), refuses the rest naming the field that says so, and writes a manifest whose clinical
 * meaning (codes, thresholds, urgency, recommendations) MONAI cannot say: those get defaults marked
 * provisional, listed for the admin to review before anyone relies on the model.
 */
import { createHash } from 'node:crypto';
import { copyFile, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { formatPath, parseManifest, type Manifest, type Normalisation } from '#server/analysis/manifest.ts';
import { MiaError } from '#server/errors.ts';

/** Bigger files are refused before hashing or loading: a slice model is a few to a few hundred MB. */
const MAX_MODEL_BYTES = 2 * 1024 * 1024 * 1024;
const MAX_JSON_BYTES = 4 * 1024 * 1024;

const dim = z.union([z.number().int(), z.string()]);
const tensorFormat = z
  .object({
    type: z.string(),
    format: z.string().optional(),
    modality: z.string().optional(),
    num_channels: z.number().int().optional(),
    spatial_shape: z.array(dim).max(8).optional(),
    dtype: z.string().optional(),
    value_range: z.array(z.number()).max(2).optional(),
    is_patch_data: z.boolean().optional(),
    channel_def: z.record(z.string(), z.string()).optional(),
  })
  .loose();

const metadataSchema = z
  .object({
    name: z.string().max(200).optional(),
    version: z.string().max(50),
    task: z.string().max(2000).optional(),
    description: z.string().max(20_000).optional(),
    intended_use: z.string().max(20_000).optional(),
    data_source: z.string().max(20_000).optional(),
    data_type: z.string().max(200).optional(),
    image_classes: z.string().max(2000).optional(),
    label_classes: z.string().max(2000).optional(),
    pred_classes: z.string().max(2000).optional(),
    references: z.array(z.string().max(2000)).max(100).optional(),
    monai_version: z.string().max(50).optional(),
    network_data_format: z.object({
      inputs: z.object({ image: tensorFormat }).loose(),
      outputs: z.object({ pred: tensorFormat }).loose(),
    }),
  })
  .loose();
type Metadata = z.infer<typeof metadataSchema>;

export type ImportOptions = { bundleDir: string; outDir: string; id?: string | undefined };
export type ImportResult = { manifest: Manifest; outDir: string; review: string[] };

/** A bundle mia cannot run or read, with the field that says why. */
function refuse(field: string, why: string): MiaError {
  return new MiaError('unprocessable', `${field}: ${why}`);
}

async function readJson(path: string, field: string): Promise<unknown> {
  let size: number;
  try {
    size = (await stat(path)).size;
  } catch {
    throw refuse(field, `${path} not found`);
  }
  if (size > MAX_JSON_BYTES) throw refuse(field, `${size} bytes: larger than ${MAX_JSON_BYTES}`);
  try {
    return JSON.parse(await readFile(path, 'utf8')) as unknown;
  } catch (err) {
    throw refuse(field, `not valid JSON: ${err instanceof Error ? err.message : 'unreadable'}`);
  }
}

async function readMetadata(bundleDir: string): Promise<Metadata> {
  const json = await readJson(join(bundleDir, 'configs', 'metadata.json'), 'configs/metadata.json');
  const parsed = metadataSchema.safeParse(json);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw refuse(issue ? formatPath(issue.path) : '(root)', issue?.message ?? 'invalid metadata');
  }
  return parsed.data;
}

type Transform = Record<string, unknown> & { _target_?: unknown };

/** The intensity transforms of configs/inference.json's preprocessing, in order. */
async function preprocessingTransforms(bundleDir: string): Promise<Transform[] | null> {
  const path = join(bundleDir, 'configs', 'inference.json');
  try {
    await stat(path);
  } catch {
    return null;
  }
  const json = await readJson(path, 'configs/inference.json');
  const found: Transform[] = [];
  // Bundles nest transforms in Compose lists under preprocessing (or elsewhere); walk the whole
  // config, bounded, and keep the ones mia knows by their target name.
  const walk = (v: unknown, depth: number): void => {
    if (depth > 12 || found.length > 100) return;
    if (Array.isArray(v)) for (const item of v.slice(0, 1000)) walk(item, depth + 1);
    else if (typeof v === 'object' && v !== null) {
      const t = v as Transform;
      if (typeof t._target_ === 'string' && /(^|\.)(ScaleIntensityRange|ScaleIntensityRangePercentiles|ScaleIntensity|NormalizeIntensity)d?$/.test(t._target_)) found.push(t);
      for (const value of Object.values(t).slice(0, 1000)) walk(value, depth + 1);
    }
  };
  walk(json, 0);
  return found;
}

const targetName = (t: Transform): string => String(t._target_).split('.').pop()?.replace(/d$/, '') ?? '';
const num = (t: Transform, key: string, fallback?: number): number => {
  const v = t[key] ?? fallback;
  if (typeof v !== 'number' || !Number.isFinite(v)) throw refuse(`configs/inference.json ${String(t._target_)}.${key}`, `expected a number, got ${JSON.stringify(v) ?? 'nothing'}`);
  return v;
};
/** Far outside any model input: "no clip" in a manifest that requires one. */
const NO_CLIP: [number, number] = [-1e9, 1e9];

/** inference.json's intensity scaling as mia's normalisation, and what about it needs a look. */
function normalisationOf(transforms: Transform[] | null, review: string[]): Normalisation {
  if (transforms === null || transforms.length === 0) {
    throw refuse('configs/inference.json', 'no ScaleIntensityRange(d), ScaleIntensityRangePercentiles(d), ScaleIntensity(d) or NormalizeIntensity(d) in it, so how the model expects intensities scaled is unknown');
  }
  const t = transforms[0] as Transform;
  if (transforms.length > 1) review.push(`input.normalisation: the bundle scales intensities ${transforms.length} times (${transforms.map(targetName).join(', ')}); mia applies only the first, ${targetName(t)}`);
  const name = targetName(t);
  if (name === 'ScaleIntensityRange') {
    const aMin = num(t, 'a_min');
    const aMax = num(t, 'a_max');
    const bMin = num(t, 'b_min', 0);
    const bMax = num(t, 'b_max', 1);
    if (!(aMax > aMin)) throw refuse(`configs/inference.json ${String(t._target_)}.a_max`, `expected more than a_min (${aMin})`);
    if (bMin !== 0 || bMax !== 1) throw refuse(`configs/inference.json ${String(t._target_)}.b_min/b_max`, `[${bMin}, ${bMax}]: mia maps a window to 0..1 only`);
    return { kind: 'window', center: (aMin + aMax) / 2, width: aMax - aMin, clip: t['clip'] === true ? [0, 1] : NO_CLIP };
  }
  if (name === 'ScaleIntensityRangePercentiles') {
    const lower = num(t, 'lower');
    const upper = num(t, 'upper');
    const bMin = num(t, 'b_min', 0);
    const bMax = num(t, 'b_max', 1);
    if (bMin !== 0 || bMax !== 1) throw refuse(`configs/inference.json ${String(t._target_)}.b_min/b_max`, `[${bMin}, ${bMax}]: mia maps percentiles to 0..1 only`);
    if (!(lower >= 0 && upper <= 100 && lower < upper)) throw refuse(`configs/inference.json ${String(t._target_)}.lower/upper`, `expected 0 <= lower < upper <= 100, got ${lower}, ${upper}`);
    return { kind: 'percentile', low: lower, high: upper, clip: t['clip'] === true ? [0, 1] : NO_CLIP };
  }
  if (name === 'ScaleIntensity') {
    const minv = num(t, 'minv', 0);
    const maxv = num(t, 'maxv', 1);
    if (minv !== 0 || maxv !== 1) throw refuse(`configs/inference.json ${String(t._target_)}.minv/maxv`, `[${minv}, ${maxv}]: mia scales to 0..1 only`);
    // Min-max scaling of the slice: percentiles 0 and 100 are its minimum and maximum.
    return { kind: 'percentile', low: 0, high: 100, clip: [0, 1] };
  }
  // NormalizeIntensity is a z-score ((v - mean) / std); mia has no z-score, so the nearest it
  // can do is a robust min-max. The model sees other values than in training: the admin decides.
  review.push('input.normalisation: the bundle uses NormalizeIntensity (a z-score); mia approximates it with a 0.5-99.5 percentile scaling to 0..1, which is NOT what the model was trained on: check its output on known cases, or export a model that takes 0..1 input');
  return { kind: 'percentile', low: 0.5, high: 99.5, clip: NO_CLIP };
}

function modalityOf(image: Metadata['network_data_format']['inputs']['image']): 'CT' | 'MR' {
  const m = image.modality?.toUpperCase();
  if (m === 'CT' || m === 'MR') return m;
  if (image.format === 'hounsfield') return 'CT';
  throw refuse('network_data_format.inputs.image.modality', `${JSON.stringify(image.modality ?? null)}: mia runs CT and MR models and needs to know which (or format "hounsfield" for CT)`);
}

/** A snake_case label from a channel's plain-language name ("Brain tumour" -> brain_tumour). */
function labelOf(name: string, index: number): string {
  const slug = name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9]+/g, '_')
    .replace(/^_+|_+$/g, '')
    .slice(0, 60);
  return /^[a-z]/.test(slug) ? slug : `class_${index}${slug ? `_${slug}` : ''}`;
}

function idOf(metadata: Metadata, given: string | undefined): string {
  const raw = given ?? metadata.name ?? metadata.task ?? 'monai-model';
  const id = raw
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60);
  if (!/^[a-z0-9][a-z0-9-]*$/.test(id)) throw refuse(given === undefined ? 'name' : '--id', `${JSON.stringify(raw)} gives no usable id: pass --id kebab-case-id`);
  return id;
}

/** MONAI versions may be "0.1" or "1.2.3rc1"; a manifest needs x.y.z. */
function semver(version: string): string {
  const parts = /^(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(version);
  if (!parts) throw refuse('version', `${JSON.stringify(version)} is not a version number`);
  return `${parts[1]}.${parts[2] ?? 0}.${parts[3] ?? 0}`;
}

/** The ONNX file's input and output names, read by onnxruntime (which also proves it loads). */
async function onnxNames(path: string): Promise<{ inputs: readonly string[]; outputs: readonly string[] }> {
  const ort = await import('onnxruntime-node');
  let session;
  try {
    session = await ort.InferenceSession.create(path, { executionProviders: ['cpu'], intraOpNumThreads: 1 });
  } catch (err) {
    throw refuse('models/model.onnx', `onnxruntime cannot load it: ${err instanceof Error ? err.message.slice(0, 300) : 'unknown error'}`);
  }
  try {
    return { inputs: session.inputNames, outputs: session.outputNames };
  } finally {
    await session.release();
  }
}

/** What the bundle says about the input, refused where mia cannot feed it. */
function checkInput(image: Metadata['network_data_format']['inputs']['image']): { height: number; width: number } {
  const at = 'network_data_format.inputs.image';
  if (image.type !== 'image') throw refuse(`${at}.type`, `${JSON.stringify(image.type)}: mia feeds images`);
  if (image.num_channels !== 1) throw refuse(`${at}.num_channels`, `${image.num_channels ?? 'absent'}: mia runs single-channel models (one greyscale slice)`);
  if (image.is_patch_data === true) throw refuse(`${at}.is_patch_data`, 'true: mia runs whole slices, not patch (sliding-window) models');
  if (image.dtype !== undefined && image.dtype !== 'float32') throw refuse(`${at}.dtype`, `${image.dtype}: mia feeds float32`);
  const shape = image.spatial_shape ?? [];
  if (shape.length === 3) throw refuse(`${at}.spatial_shape`, `${JSON.stringify(shape)} is 3D: mia runs 2D slice models`);
  if (shape.length !== 2) throw refuse(`${at}.spatial_shape`, `${JSON.stringify(shape)}: expected [H, W]`);
  const [h, w] = shape;
  const fixed = (v: unknown): v is number => typeof v === 'number' && Number.isInteger(v) && v > 0 && v <= 4096;
  if (!fixed(h) || !fixed(w)) throw refuse(`${at}.spatial_shape`, `${JSON.stringify(shape)}: mia needs a fixed input size (positive integers up to 4096), it resizes each slice to it`);
  return { height: h, width: w };
}

type ClassifierChannels = { channels: string[]; names: string[]; backgroundIndex: number | undefined };

function checkOutput(pred: Metadata['network_data_format']['outputs']['pred']): ClassifierChannels {
  const at = 'network_data_format.outputs.pred';
  if (pred.type !== 'probabilities') {
    throw refuse(`${at}.type`, `${JSON.stringify(pred.type)}: this importer makes slice classifiers ("probabilities", one score per class); segmentation and detection bundles need a manifest written by hand (docs/models.md)`);
  }
  const count = pred.num_channels;
  if (count === undefined || count < 1 || count > 100) throw refuse(`${at}.num_channels`, `${count ?? 'absent'}: expected 1 to 100 classes`);
  const def = pred.channel_def ?? {};
  const entries = Array.from({ length: count }, (_, i) => def[String(i)] ?? `class ${i}`);
  const backgroundIndex = count > 1 ? entries.findIndex((n) => /^(background|normal|none|negative|no[ _-]finding)$/i.test(n.trim())) : -1;
  const channels: string[] = [];
  const names: string[] = [];
  entries.forEach((n, i) => {
    if (i === backgroundIndex) return;
    let label = labelOf(n, i);
    while (channels.includes(label)) label = `${label}_${i}`;
    channels.push(label);
    names.push(n);
  });
  return { channels, names, backgroundIndex: backgroundIndex >= 0 ? backgroundIndex : undefined };
}

/** Reads the bundle, writes <outDir>/manifest.json and model.onnx; refuses before writing anything. */
export async function importMonaiBundle(options: ImportOptions): Promise<ImportResult> {
  const { bundleDir } = options;
  const metadata = await readMetadata(bundleDir);
  const review: string[] = [];
  const { image } = metadata.network_data_format.inputs;
  const { pred } = metadata.network_data_format.outputs;
  const size = checkInput(image);
  const out = checkOutput(pred);
  const modality = modalityOf(image);
  const normalisation = normalisationOf(await preprocessingTransforms(bundleDir), review);

  const source = join(bundleDir, 'models', 'model.onnx');
  let bytes: number;
  try {
    bytes = (await stat(source)).size;
  } catch {
    throw refuse('models/model.onnx', 'not found: export the network to ONNX first (MONAI: python -m monai.bundle onnx_export)');
  }
  if (bytes === 0 || bytes > MAX_MODEL_BYTES) throw refuse('models/model.onnx', `${bytes} bytes: expected 1 to ${MAX_MODEL_BYTES}`);
  const names = await onnxNames(source);
  if (names.inputs.length !== 1) throw refuse('models/model.onnx', `${names.inputs.length} inputs (${names.inputs.join(', ')}): mia feeds one image tensor`);
  if (names.outputs.length !== 1) throw refuse('models/model.onnx', `${names.outputs.length} outputs (${names.outputs.join(', ')}): a classifier has one scores tensor`);

  // The network's last layer gives logits unless the export included the activation; MONAI's
  // postprocessing (Activations) runs outside the network, so logits are the usual case.
  const softmax = out.backgroundIndex !== undefined || pred.format === 'labels';
  const activation = softmax ? 'softmax_logits' : 'sigmoid_logits';
  review.push(`output.score_activation: set to ${activation} (${softmax ? 'mutually exclusive classes' : 'independent classes'}, the network's raw output); if the ONNX export already ends in a ${softmax ? 'softmax' : 'sigmoid'}, change it to ${softmax ? 'softmax_applied' : 'sigmoid_applied'}`);

  const id = idOf(metadata, options.id);
  const name = metadata.name ?? metadata.task ?? id;
  const digest = createHash('sha256').update(await readFile(source)).digest('hex');
  const labels = out.channels.map((label, i) => ({
    label,
    display_name: out.names[i] as string,
    definition: `${out.names[i] as string}: class of the MONAI bundle ${name}${metadata.pred_classes ? ` (${metadata.pred_classes})` : ''}. Imported, not reviewed.`,
    // A placeholder mia cannot know: "Clinical finding", provisional until an admin codes it.
    code: { system: 'SNOMED CT' as const, value: '404684003', meaning: 'Clinical finding', provisional: true },
    threshold: 0.5,
    urgency: 'routine' as const,
  }));
  review.push(...labels.map((l) => `labels: ${l.label}: code (a placeholder, provisional), threshold 0.5 and urgency routine are defaults, not the bundle's`));
  review.push('recommendations: generic texts written by the importer; replace them with your service\'s');
  review.push('applies_to: body_part, min_slices (1) and image_types are defaults; MONAI does not say');
  review.push('metrics: empty; mia has not evaluated this model (the bundle\'s eval_metrics are in training_data.bundle_eval_metrics, unchecked)');
  review.push('not_for_clinical_use: true until you have validated the model on your own cases');

  const manifestJson = {
    manifest_version: 1,
    id,
    name,
    version: semver(metadata.version),
    file: { path: 'model.onnx', sha256: digest, bytes, format: 'onnx' },
    intended_use: metadata.intended_use ?? metadata.description ?? metadata.task ?? `Imported from the MONAI bundle ${name}; the bundle states no intended use.`,
    not_for_clinical_use: true,
    applies_to: { modalities: [modality], min_slices: 1, image_types: ['ORIGINAL', 'DERIVED'] },
    input: {
      tensor: names.inputs[0],
      shape: ['N', 1, size.height, size.width],
      dtype: 'float32',
      channels: 1,
      size,
      resampling: { method: 'bilinear', align: 'half_pixel', antialias: false, keep_aspect: false },
      normalisation: { [modality]: normalisation },
      order: 'normalise_then_resize',
    },
    output: {
      decoding: 'classifier',
      tensor: names.outputs[0],
      score_activation: activation,
      ...(out.backgroundIndex === undefined ? {} : { background_index: out.backgroundIndex }),
      channels: out.channels,
    },
    labels,
    recommendations: {
      rules: labels.map((l) => ({ label: l.label, min_confidence: 0.5, text: `Possible ${l.display_name} flagged by ${name} (imported model, provisional): radiologist review.` })),
      none_found: `Nothing above threshold from ${name}. This does not exclude disease: routine radiologist review.`,
    },
    training_data: {
      description: metadata.data_source ?? 'Not stated in the MONAI bundle.',
      source: 'MONAI bundle configs/metadata.json',
      ...(metadata.data_type ? { data_type: metadata.data_type } : {}),
      ...(metadata.image_classes ? { image_classes: metadata.image_classes } : {}),
      ...(metadata.label_classes ? { label_classes: metadata.label_classes } : {}),
      ...(metadata.references ? { references: metadata.references } : {}),
      ...(metadata.monai_version ? { monai_version: metadata.monai_version } : {}),
      ...(metadata['eval_metrics'] !== undefined ? { bundle_eval_metrics: metadata['eval_metrics'] } : {}),
      review: review,
    },
    metrics: { source: 'none: imported from a MONAI bundle, not evaluated by mia', per_label: {}, false_positives_per_series: 0 },
  };
  // The importer's own output must be a manifest mia loads; a failure here is a bug named by field.
  const manifest = parseManifest(manifestJson, 'imported manifest');

  await mkdir(options.outDir, { recursive: true });
  try {
    await copyFile(source, join(options.outDir, 'model.onnx'));
    await writeFile(join(options.outDir, 'manifest.json'), `${JSON.stringify(manifestJson, null, 2)}\n`);
  } catch (err) {
    await rm(join(options.outDir, 'model.onnx'), { force: true });
    throw err;
  }
  return { manifest, outDir: options.outDir, review };
}
