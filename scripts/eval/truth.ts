/**
 * The held-out phantoms' ground truth (truth.json, written by the generator beside the DICOM files)
 * and the findings mia made on them, in one shape the scoring works on. Parsed with zod: the file
 * comes from another program, and a wrong field must say which.
 */
import { readFileSync } from 'node:fs';
import { z } from 'zod';

const box = z.object({ x: z.number(), y: z.number(), width: z.number().nonnegative(), height: z.number().nonnegative() });
export type Box = z.infer<typeof box>;

const lesionSlice = z.object({ slice_index: z.number().int().min(0), instance_uid: z.string(), box });

const lesion = z.object({
  label: z.string(),
  kind: z.string(),
  slice_index: z.number().int().min(0),
  box,
  slices: z.array(lesionSlice).min(1),
});
export type TruthLesion = z.infer<typeof lesion>;

const series = z.object({
  seed: z.number().int(),
  modality: z.string(),
  scan_uid: z.string(),
  slices: z.number().int().positive(),
  instance_uids: z.array(z.string()).min(1),
  lesions: z.array(lesion),
});
export type TruthSeries = z.infer<typeof series>;

const truthFile = z.object({ generator: z.string(), series: z.array(series) });
export type Truth = z.infer<typeof truthFile>;

export function readTruth(path: string): Truth {
  const parsed = truthFile.safeParse(JSON.parse(readFileSync(path, 'utf8')));
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    throw new Error(`${path}: ${issue ? `${issue.path.join('.')}: ${issue.message}` : 'invalid'}`);
  }
  return parsed.data;
}

/** One finding mia reported on a held-out series, with the model's raw score. */
export type Candidate = { label: string; score: number; sliceIndex: number; box: Box };

/** A series with its truth and what the model found there. */
export type ScoredSeries = { truth: TruthSeries; candidates: Candidate[] };
