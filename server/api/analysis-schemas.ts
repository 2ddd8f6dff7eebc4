/** The analysis part of the API contract: installed models, analysis jobs and their requests. */
import { z } from 'zod';
import { URGENCIES } from '#common/vocabulary.ts';

const isoTime = z.string().describe('UTC time, ISO 8601');
const modelId = z.string().min(1).max(64).regex(/^[a-z0-9][a-z0-9-]*$/, 'expected a model id (lowercase letters, digits, dashes)');

export const modelIdParam = z.object({ id: modelId });
export const analysisIdParam = z.object({ id: z.string().min(1).max(64) });

const sensitivityAt = z.record(z.string(), z.number().nullable()).describe('Lesion sensitivity at "0.25", "0.5", "1", "2" false positives per series');

const heldoutMetrics = z.object({
  family: z.string(),
  series: z.number().int(),
  lesions: z.number().int(),
  sensitivity_at: sensitivityAt,
  froc: z.array(z.object({ threshold: z.number(), false_positives_per_series: z.number(), sensitivity: z.number() })),
  reliability: z.array(z.object({ low: z.number(), high: z.number(), count: z.number().int(), mean_confidence: z.number().nullable(), observed: z.number().nullable() })),
  expected_calibration_error: z.number(),
  per_label: z.record(z.string(), z.object({ lesions: z.number().int(), sensitivity_at: sensitivityAt })),
  per_modality: z.record(z.string(), z.object({ series: z.number().int(), lesions: z.number().int(), sensitivity_at: sensitivityAt })),
});

const measuredLabel = z.object({ lesions: z.number().int(), sensitivity: z.number().nullable(), false_positives_per_series: z.number() });

export const operatingPoint = z.object({
  name: z.string(),
  display_name: z.string(),
  description: z.string(),
  thresholds: z.record(z.string(), z.number()),
  measured: z
    .object({
      on: z.string(),
      series: z.number().int(),
      lesions: z.number().int(),
      sensitivity: z.number().nullable(),
      false_positives_per_series: z.number(),
      per_label: z.record(z.string(), measuredLabel),
    })
    .nullable()
    .describe('What these thresholds gave on held-out data they were not chosen on'),
  selected: z.boolean().describe('The point new analyses use'),
});

export const operatingPointBody = z.object({ name: z.string().min(1).max(64).describe('One of the model\'s operating_points') }).strict();

export const modelLabel = z.object({
  label: z.string(),
  display_name: z.string(),
  definition: z.string(),
  code: z.object({ system: z.string(), value: z.string(), meaning: z.string() }),
  threshold: z.number().describe('Decision threshold: boxes below it are not findings'),
  urgency: z.enum(URGENCIES).describe('How soon a finding of this label needs a reader: the worklist\'s triage priority'),
});

export const model = z.object({
  id: z.string(),
  name: z.string().nullable(),
  version: z.string().nullable(),
  sha256: z.string().nullable().describe('SHA-256 of the ONNX file, as the manifest states it'),
  source: z.enum(['bundled', 'user']).describe('bundled with mia, or dropped into the data folder\'s models/'),
  intended_use: z.string().nullable(),
  not_for_clinical_use: z.boolean().nullable(),
  applies_to: z
    .object({
      modalities: z.array(z.string()),
      body_part: z.string().nullable(),
      min_slices: z.number().int(),
      image_types: z.array(z.string()),
      photometric: z.array(z.string()).nullable(),
    })
    .nullable(),
  labels: z.array(modelLabel),
  metrics: z
    .object({
      source: z.string(),
      false_positives_per_series: z.number(),
      per_label: z.record(z.string(), z.object({ sensitivity: z.number().nullable(), false_positives_per_series: z.number() })),
      expected_calibration_error: z.number().nullable(),
      heldout: heldoutMetrics.nullable().describe('Figures on a phantom family the model never trained on (npm run eval): FROC and reliability'),
    })
    .nullable(),
  card: z
    .object({
      intended_use: z.string(),
      users: z.string().nullable(),
      training_data: z.string(),
      limitations: z.array(z.string()).describe('What the model must not be trusted for'),
      evaluation: z.string().describe('Where its figures come from, in words'),
      references: z.array(z.string()),
    })
    .nullable()
    .describe('The model card: intended use, training data, evaluation and limits'),
  calibration: z.object({ method: z.string(), fitted_on: z.string() }).nullable().describe('How confidences were calibrated; null when they are raw model scores'),
  operating_points: z.array(operatingPoint).describe('Named threshold sets an admin can choose for the site'),
  operating_point: z.string().nullable().describe('The operating point new analyses use; null when the model offers none'),
  status: z.enum(['ready', 'invalid']),
  error: z.string().nullable().describe('Why an invalid model cannot be used, naming the manifest field'),
  selected: z.boolean().describe('The model new analyses use'),
});
export type Model = z.infer<typeof model>;

export const ANALYSIS_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'not_applicable', 'cancelled'] as const;

export const analysisJob = z.object({
  id: z.string(),
  scan_id: z.string(),
  status: z.enum(ANALYSIS_STATUSES),
  model: z.object({ id: z.string(), name: z.string(), version: z.string(), sha256: z.string() }),
  thresholds: z.record(z.string(), z.number()).describe('Per-label decision thresholds used'),
  progress: z.object({ slices_done: z.number().int(), slices_total: z.number().int().nullable() }),
  reason: z.string().nullable().describe('Why it failed, or why the model does not apply to the scan'),
  recommendation: z.string().nullable(),
  findings: z.number().int().nullable().describe('Number of findings of a succeeded analysis (see the scan\'s results)'),
  requested_by: z.string().nullable(),
  created_at: isoTime,
  started_at: isoTime.nullable(),
  finished_at: isoTime.nullable(),
});
export type AnalysisJob = z.infer<typeof analysisJob>;

export const createAnalysisBody = z
  .object({ model_id: modelId.optional().describe('An installed, valid model; default the selected one') })
  .strict();
