/**
 * Which per-label thresholds an analysis uses. A manifest may offer named operating points
 * (e.g. high sensitivity for triage) with what each gave on held-out data; an admin chooses one
 * per model for the site, and every analysis records the point and thresholds it ran with.
 */
import type { Manifest } from '#server/analysis/manifest.ts';
import { MiaError } from '#server/errors.ts';
import type { Database } from '#server/store/database.ts';
import { getSetting, setSetting } from '#server/store/settings.ts';

export type Decision = {
  /** The operating point's name; null for a manifest without operating points. */
  operatingPoint: string | null;
  thresholds: Record<string, number>;
};

/** Settings key of the operating point an admin chose for a model. */
export function operatingPointSetting(modelId: string): string {
  return `analysis.operating_point.${modelId}`;
}

/** The chosen point when the manifest (still) has it, else its default, else the labels' thresholds. */
export function decisionOf(manifest: Pick<Manifest, 'labels' | 'operating_points' | 'default_operating_point'>, chosen: string | null): Decision {
  const points = manifest.operating_points ?? [];
  const point = points.find((p) => p.name === chosen) ?? points.find((p) => p.name === manifest.default_operating_point);
  if (point) return { operatingPoint: point.name, thresholds: Object.fromEntries(manifest.labels.map((l) => [l.label, point.thresholds[l.label] ?? l.threshold])) };
  return { operatingPoint: null, thresholds: Object.fromEntries(manifest.labels.map((l) => [l.label, l.threshold])) };
}

export async function siteDecision(db: Database, model: { id: string; manifest: Manifest }): Promise<Decision> {
  return decisionOf(model.manifest, await getSetting(db, operatingPointSetting(model.id)) ?? null);
}

export async function saveOperatingPoint(db: Database, model: { id: string; manifest: Manifest }, name: string): Promise<Decision> {
  const names = (model.manifest.operating_points ?? []).map((p) => p.name);
  if (!names.includes(name)) {
    const offered = names.length > 0 ? `it offers ${names.join(', ')}` : 'its manifest offers no operating points';
    throw new MiaError('invalid', 'Unknown operating point', `name: model ${model.id} has no operating point ${name}; ${offered}`);
  }
  await setSetting(db, operatingPointSetting(model.id), name);
  return decisionOf(model.manifest, name);
}
