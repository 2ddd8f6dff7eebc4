/**
 * A finding's label as a coded concept: the code the glossary gives it (the manifest of the model
 * that produced the analysis when that model is installed, else mia's built-in glossary), in
 * SNOMED CT (SCT) or RadLex (RADLEX); a label with no entry, or with a terminology DICOM has no
 * designator for, gets mia's private scheme 99MIA with the label itself as the code value.
 */
import { listInstalledModels } from '#server/analysis/registry.ts';
import type { ServerConfig } from '#server/config.ts';
import { BUILTIN_LABELS } from '#server/labels/glossary.ts';
import type { Code } from '#server/dicom-sr/content-items.ts';
import { MIA_SCHEME, schemeDesignator } from '#server/dicom-sr/codes.ts';

type GlossaryCode = { system: string; value: string; meaning: string };

export type LabelCoder = (label: string, displayName?: string) => Code;

export async function labelCoder(config: Pick<ServerConfig, 'modelsDirs' | 'dataDir'>, modelId: string): Promise<LabelCoder> {
  const models = await listInstalledModels(config);
  const model = models.find((m) => m.id === modelId && m.status === 'ready');
  const entries = new Map<string, GlossaryCode>();
  for (const l of model?.manifest?.labels ?? []) entries.set(l.label, l.code);
  for (const l of BUILTIN_LABELS) if (!entries.has(l.label) && l.code) entries.set(l.label, l.code);
  return (label, displayName) => {
    const entry = entries.get(label);
    const scheme = entry ? schemeDesignator(entry.system) : null;
    if (entry && scheme) return { value: entry.value, scheme, meaning: entry.meaning };
    return { value: label, scheme: MIA_SCHEME, meaning: displayName ?? label };
  };
}
