/**
 * Worklist triage (issue 11): how soon a scan needs a reader, from its latest analysis. The
 * priority is the most urgent label among the findings a reader would be shown (at or above
 * their label's threshold) and has not rejected; the urgency and the label's name are the ones
 * stored with the analysis (migration 13), so a later manifest cannot re-prioritise old results.
 * A reader rejecting the haemorrhage drops the priority; accepting it keeps it.
 */
import { URGENCIES, type Urgency } from '#common/vocabulary.ts';
import type { Triage } from '#server/api/schemas.ts';
import type { TriageLabels } from '#server/store/analyses.ts';
import type { SummaryAnalysis, SummaryFinding } from '#server/store/scan-summaries.ts';
import type { SliceIndex } from '#server/findings/places.ts';
import { isNumber, isOneOf, isRecord, isRecordOf, isString, parsedAs } from '#server/store/stored-json.ts';

const isUrgency = isOneOf(URGENCIES);
const isTriageLabel = (value: unknown): value is TriageLabels[string] => isRecord(value) && isUrgency(value['urgency']) && isString(value['display_name']);
const isTriageLabels = (value: unknown): value is TriageLabels => isRecordOf(value, isTriageLabel);
const isThresholds = (value: unknown): value is Record<string, number> => isRecordOf(value, isNumber);

/** Lower is more urgent (the order of URGENCIES). */
export const urgencyRank = (urgency: Urgency): number => URGENCIES.indexOf(urgency);

/**
 * Parsed JSON by its text, per shape check. The analyses of one model carry the same few texts, and a
 * page of 50 studies parsed them 200 times (their parse was 5% of a studies request, cpu-prof
 * 2026-11-26). Bounded: texts from many manifests only cost a re-parse.
 */
const PARSED_KEPT = 64;
const parsedCache = new WeakMap<(value: unknown) => boolean, Map<string, unknown>>();

function parsed<T>(check: (value: unknown) => value is T, json: string, fallback: T): T {
  let cache = parsedCache.get(check);
  if (!cache) parsedCache.set(check, (cache = new Map()));
  if (cache.has(json)) return (cache.get(json) as T | null) ?? fallback;
  const result = parsedAs(json, check);
  if (cache.size >= PARSED_KEPT) cache.clear();
  // The parsed value is shared: its readers only read it.
  cache.set(json, result);
  return result ?? fallback;
}

/** The findings that set the priority, most urgent first, then the most confident. */
export function triageFindings<F extends SummaryFinding>(analysis: SummaryAnalysis, findings: readonly F[]): { finding: F; urgency: Urgency; name: string }[] {
  const labels: TriageLabels = parsed(isTriageLabels, analysis.triage_labels, {});
  const cut = parsed(isThresholds, analysis.thresholds, {});
  return findings
    // A reader-drawn finding is the reader's own call: it counts whatever its nominal confidence.
    .filter((f) => f.review !== 'rejected' && (f.source === 'reader' || f.confidence >= (cut[f.label] ?? 0)))
    .map((finding) => ({ finding, urgency: labels[finding.label]?.urgency ?? 'routine', name: labels[finding.label]?.display_name ?? finding.label }))
    .sort((a, b) => urgencyRank(a.urgency) - urgencyRank(b.urgency) || b.finding.confidence - a.finding.confidence || a.finding.id - b.finding.id);
}

/** Null before any analysis; routine with no reason when nothing a reader would see was found. */
export function triageOf(analysis: SummaryAnalysis | undefined, findings: readonly SummaryFinding[], slices: SliceIndex | undefined): Triage | null {
  if (!analysis) return null;
  const [top] = triageFindings(analysis, findings);
  if (!top) return { priority: 'routine', reason: null, finding_id: null };
  const { finding } = top;
  const entry = slices?.entries.get(`${finding.instance_uid}#${finding.frame}`);
  const parts = [
    finding.source === 'reader' ? `${top.name} (drawn by the reader)` : `${top.name} ${Math.round(finding.confidence * 100)}%`,
    ...(entry && slices ? [`slice ${entry.slice} of ${slices.slices}`] : []),
    ...(finding.review === 'accepted' && finding.source === 'model' ? ['accepted'] : []),
  ];
  return { priority: top.urgency, reason: parts.join(', '), finding_id: finding.public_id };
}

/** The most urgent of several (a study's series); null when none was analysed. */
export function highestTriage(triages: readonly (Triage | null)[]): Triage | null {
  let best: Triage | null = null;
  for (const triage of triages) {
    if (!triage) continue;
    if (!best || urgencyRank(triage.priority) < urgencyRank(best.priority) || (best.reason === null && triage.reason !== null && triage.priority === best.priority)) best = triage;
  }
  return best;
}
