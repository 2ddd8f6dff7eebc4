/**
 * What a report recommends (issue 11): the reader's verdicts, once there are any, through the
 * analysing model's manifest rules (per modality); before any verdict, the model's own
 * suggestion, marked with basis "model". The manifests are read (async, cached by folder) before
 * the report's transaction, so the domain code below stays synchronous.
 */
import type { Recommendations } from '#server/analysis/manifest.ts';
import { recommendFromVerdicts } from '#server/analysis/recommend.ts';
import { listInstalledModels } from '#server/analysis/registry.ts';
import type { ServerConfig } from '#server/config.ts';
import { BUILTIN_LABELS } from '#server/labels/glossary.ts';

export type RecommendationBasis = 'model' | 'verdicts' | 'reader';

/** The rules and label names of the model that made an analysis, by model id. */
export type ModelVocabularies = (modelId: string) => { recommendations: Recommendations | null; displayName(label: string): string };

const glossaryName = (label: string): string => BUILTIN_LABELS.find((l) => l.label === label)?.display_name ?? label;

export async function loadModelVocabularies(config: Pick<ServerConfig, 'modelsDirs' | 'dataDir'>): Promise<ModelVocabularies> {
  const models = await listInstalledModels(config);
  return (modelId) => {
    // A model removed since the analysis leaves its findings without rules: the accepted labels
    // are still listed (with the glossary's names), never dropped.
    const manifest = models.find((m) => m.id === modelId)?.manifest ?? null;
    return {
      recommendations: manifest?.recommendations ?? null,
      displayName: (label) => manifest?.labels.find((l) => l.label === label)?.display_name ?? glossaryName(label),
    };
  };
}

export function reportRecommendation(
  vocabularies: ModelVocabularies,
  input: {
    modelId: string;
    modality: string;
    findings: ReadonlyArray<{ label: string; review: 'accepted' | 'rejected' | null }>;
    modelSuggestion: string;
  },
): { text: string; basis: Exclude<RecommendationBasis, 'reader'> } {
  const vocabulary = vocabularies(input.modelId);
  const text = recommendFromVerdicts(input.findings, vocabulary.recommendations, input.modality, vocabulary.displayName);
  return text === null ? { text: input.modelSuggestion, basis: 'model' } : { text, basis: 'verdicts' };
}
