/**
 * Recommendations (spec 2.3) from the manifest's ordered rules. Two sources, never mixed:
 * - the model's suggestion, stored with each analysis: every label the model found at or above
 *   its rule's confidence;
 * - the reader's, used by reports once any finding has a verdict: every accepted label, whatever
 *   its confidence, and never a rejected one (issue 11: a rejected infarct must not send the
 *   patient to diffusion MR, and an accepted tumour must not be left out).
 * Rules may name the modalities they apply to, so an MR study is not told to get an MR.
 */
import type { Recommendations } from '#server/analysis/manifest.ts';

type Rule = Recommendations['rules'][number];
type Scored = { label: string; confidence: number };
type Reviewed = { label: string; review: 'accepted' | 'rejected' | null };

function appliesTo(rule: Rule, modality: string): boolean {
  return rule.modalities === undefined || (rule.modalities as readonly string[]).includes(modality);
}

/** The first rule for `label` on `modality`: rules are in priority order, one per label wins. */
function ruleFor(recommendations: Recommendations, label: string, modality: string): Rule | undefined {
  return recommendations.rules.find((rule) => rule.label === label && appliesTo(rule, modality));
}

/** Labels in the rules' priority order (the most urgent first), then any without a rule. */
function inPriorityOrder(labels: ReadonlySet<string>, recommendations: Recommendations): string[] {
  const ranked = recommendations.rules.map((r) => r.label).filter((label, i, all) => labels.has(label) && all.indexOf(label) === i);
  return [...ranked, ...[...labels].filter((label) => !ranked.includes(label)).sort()];
}

/** The model's own suggestion: one sentence per label found, the most urgent first. */
export function recommend(findings: readonly Scored[], recommendations: Recommendations, modality: string): string {
  const texts = recommendations.rules
    .filter((rule) => appliesTo(rule, modality) && findings.some((f) => f.label === rule.label && f.confidence >= rule.min_confidence))
    .filter((rule, i, all) => all.findIndex((r) => r.label === rule.label) === i)
    .map((rule) => rule.text);
  return texts.length === 0 ? recommendations.none_found : texts.join(' ');
}

export type RecommendationBasis = 'model' | 'verdicts';

/**
 * The reader's recommendation, or null while no finding has a verdict (the model's suggestion
 * then stands, marked as such). `displayName` names a label for the reader.
 */
export function recommendFromVerdicts(
  findings: readonly Reviewed[],
  recommendations: Recommendations | null,
  modality: string,
  displayName: (label: string) => string,
): string | null {
  if (!findings.some((f) => f.review !== null)) return null;
  const accepted = new Set(findings.filter((f) => f.review === 'accepted').map((f) => f.label));
  const open = findings.filter((f) => f.review === null).length;
  const pending = open === 0 ? '' : ` ${open} AI finding${open === 1 ? ' is' : 's are'} not reviewed yet.`;
  if (accepted.size === 0) {
    return `No AI finding was accepted on review; the rejected ones do not drive a recommendation. Routine radiologist reporting.${pending}`;
  }
  const rules = recommendations ?? { rules: [], none_found: '' };
  const lines = inPriorityOrder(accepted, rules).map((label) => {
    const rule = ruleFor(rules, label, modality);
    // A rule's advice is the next step once a reader confirmed the finding; its text is worded
    // for a model's flag ("possible ..."), which an accepted finding no longer is.
    const advice = rule?.advice ?? rule?.text ?? 'correlate clinically.';
    return `${displayName(label)} (accepted on review): ${advice}`;
  });
  return `${lines.join(' ')}${pending}`;
}
