/** The analysis part of the API contract: installed models, analysis jobs and their requests. */
import { z } from 'zod';
import { URGENCIES } from '#common/vocabulary.ts';

const isoTime = z.string().describe('UTC time, ISO 8601');
const modelId = z.string().min(1).max(64).regex(/^[a-z0-9][a-z0-9-]*$/, 'expected a model id (lowercase letters, digits, dashes)');

export const modelIdParam = z.object({ id: modelId });
export const analysisIdParam = z.object({ id: z.string().min(1).max(64) });

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
    })
    .nullable(),
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
