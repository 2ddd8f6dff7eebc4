/** The free-text recommendation of an analysis (spec 2.3), from the manifest's ordered rules. */
import type { Recommendations } from '#server/analysis/manifest.ts';

type Scored = { label: string; confidence: number };

/**
 * Rules are in priority order (the most urgent first) and the first rule with a finding of its
 * label at or above its confidence wins, so one scan gets one clear next step.
 */
export function recommend(findings: readonly Scored[], recommendations: Recommendations): string {
  for (const rule of recommendations.rules) {
    if (findings.some((f) => f.label === rule.label && f.confidence >= rule.min_confidence)) return rule.text;
  }
  return recommendations.none_found;
}
