/**
 * The impression a new draft starts with. The server drafts reports with an empty impression;
 * the reader has already accepted findings in the viewer, so the draft offers them as text -
 * label display name, confidence and slice - to edit, never saved until the reader saves.
 */
import type { Finding, Lesion } from './api/types.ts';
import { lesionText } from './lesion-text.ts';

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

/**
 * The impression from the server's lesions (one line per accepted lesion, not per slice), with
 * sizes in mm and slices; null when none is accepted. Reports signed before findings had places
 * fall back to impressionFromFindings.
 */
export function impressionFromLesions(
  lesions: readonly Lesion[],
  findings: readonly Finding[],
  sources: Pick<ImpressionSources, 'displayName' | 'model'>,
): string | null {
  const accepted = lesions.filter((l) => l.review === 'accepted');
  // A classifier's finding is in no lesion (it has no extent): it is said as what it is.
  const wholeImage = findings.filter((f) => f.localization === 'image' && f.review === 'accepted');
  if (accepted.length === 0 && wholeImage.length === 0) return null;
  const places = new Map(findings.map((f) => [f.id, f.place]));
  const byReader = new Set(findings.filter((f) => f.source === 'reader').map((f) => f.id));
  // A lesion only the reader drew has no AI confidence to give.
  const origin = (lesion: Lesion) =>
    lesion.finding_ids.every((id) => byReader.has(id)) ? 'added by the reader' : `AI confidence ${Math.round(lesion.confidence * 100)}%`;
  const lines = [
    ...accepted.map((lesion) => `- ${sources.displayName(lesion.label)}: ${lesionText(lesion, places)} (${origin(lesion)}).`),
    ...wholeImage.map((f) => {
      const slice = f.place ? ` on slice ${f.place.slice} of ${f.place.slices}` : '';
      return `- ${sources.displayName(f.label)}: whole-image finding${slice}, no location given (AI confidence ${Math.round(f.confidence * 100)}%).`;
    }),
  ];
  const by = sources.model ? ` (${sources.model}, not for clinical use)` : '';
  // Not "AI findings" when the reader drew some of them.
  const what = accepted.some((l) => origin(l) === 'added by the reader') ? 'Findings accepted on review, AI and reader-drawn' : 'AI findings accepted on review';
  return `${what}${by}:\n${lines.join('\n')}`;
}
