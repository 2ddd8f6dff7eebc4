/**
 * The impression a new draft starts with. The server drafts reports with an empty impression;
 * the reader has already accepted findings in the viewer, so the draft offers them as text -
 * label display name, confidence and slice - to edit, never saved until the reader saves.
 */
import type { Finding } from './api/types.ts';

export type FindingPlace = { slice: number; slices: number } | null;

export type ImpressionSources = {
  displayName(label: string): string;
  place(finding: Finding): FindingPlace;
  model: string | null;
};

/** Null when no finding is accepted: an empty impression is better than an invented one. */
export function impressionFromFindings(findings: readonly Finding[], sources: ImpressionSources): string | null {
  const accepted = findings.filter((f) => f.review === 'accepted');
  if (accepted.length === 0) return null;
  const lines = accepted.map((finding) => {
    const where = sources.place(finding);
    const slice = where ? `, slice ${where.slice} of ${where.slices}` : '';
    return `- ${sources.displayName(finding.label)}: AI confidence ${Math.round(finding.confidence * 100)}%${slice}.`;
  });
  const by = sources.model ? ` (${sources.model}, not for clinical use)` : '';
  return `AI findings accepted on review${by}:\n${lines.join('\n')}`;
}
