/** Shapes scan rows, analyses and findings into the API's scan and result records (spec 2.3-2.5). */
import type { Scan, ScanResultV11 } from '#server/api/schemas.ts';
import type { RleMask } from '#common/rle-mask.ts';
import type { AnalysisRow, FindingRow } from '#server/store/analyses.ts';
import { findAnalysesWithFindings } from '#server/store/analyses.ts';
import type { Database } from '#server/store/database.ts';
import type { ScanRow } from '#server/store/scans.ts';
import type { SummaryAnalysis, SummaryFinding } from '#server/store/scan-summaries.ts';
import { groupLesions } from '#server/findings/lesions.ts';
import { placeOf, type SliceIndex } from '#server/findings/places.ts';
import { triageOf } from '#server/scans/triage.ts';

/** The columns a result shows (a page of results reads only these: server/store/results.ts). */
type ShownFinding = Pick<
  FindingRow,
  'public_id' | 'label' | 'confidence' | 'x' | 'y' | 'width' | 'height' | 'instance_uid' | 'frame' | 'review' | 'source' | 'review_reason' | 'review_disputed' | 'localization'
> & { mask?: string | null };
type ShownAnalysis = Pick<
  AnalysisRow,
  'public_id' | 'model_id' | 'model_name' | 'model_version' | 'model_sha256' | 'thresholds' | 'operating_point' | 'recommendation' | 'started_at' | 'finished_at'
>;

/** What a model finding was decided with: its analysis's thresholds, model version and operating point. */
export type FindingDecision = { thresholds: Readonly<Record<string, number>>; modelVersion: string; operatingPoint: string | null };

export function decisionOfAnalysis(analysis: Pick<AnalysisRow, 'thresholds' | 'model_version' | 'operating_point'>): FindingDecision {
  return { thresholds: parseThresholds(analysis.thresholds), modelVersion: analysis.model_version, operatingPoint: analysis.operating_point ?? null };
}

/**
 * Thresholds by their text, parsed once: every analysis of a model at one operating point has the
 * same, and a results page parsed them 50 times (2 % of the server's CPU at 50 connections, by
 * CPU profile, 2026-11-26). Bounded: a text is a model's labels, so an installation has few.
 */
const parsedThresholds = new Map<string, Readonly<Record<string, number>>>();
const PARSED_THRESHOLDS_MAX = 256;

function parseThresholds(json: string): Readonly<Record<string, number>> {
  const known = parsedThresholds.get(json);
  if (known) return known;
  let parsed: Record<string, number> = {};
  try {
    const value: unknown = JSON.parse(json);
    if (typeof value === 'object' && value !== null) parsed = Object.fromEntries(Object.entries(value).filter((e): e is [string, number] => typeof e[1] === 'number'));
  } catch {
    // Not JSON: no thresholds to show.
  }
  if (parsedThresholds.size >= PARSED_THRESHOLDS_MAX) parsedThresholds.clear();
  const frozen = Object.freeze(parsed);
  parsedThresholds.set(json, frozen);
  return frozen;
}

export type FindingFilter = { label?: string | undefined; minConfidence?: number | undefined };

function keepFinding(row: Pick<FindingRow, 'label' | 'confidence'>, filter: FindingFilter): boolean {
  return (filter.label === undefined || row.label === filter.label) && (filter.minConfidence === undefined || row.confidence >= filter.minConfidence);
}

/**
 * `slices` gives the finding's place (slice, size in mm); without it the place is null. `decision`
 * adds what a model finding was decided with; a reader's finding has no threshold or model.
 */
export function toFinding(row: ShownFinding, slices?: SliceIndex, decision?: FindingDecision): ScanResultV11['findings'][number] {
  const byModel = row.source !== 'reader';
  return {
    id: row.public_id,
    label: row.label,
    confidence: row.confidence,
    location: { x: row.x, y: row.y, width: row.width, height: row.height },
    instance_uid: row.instance_uid,
    frame: row.frame,
    localization: row.localization,
    review: row.review,
    source: row.source,
    review_reason: row.review_reason,
    ...(row.review_disputed ? { review_disputed: true } : {}),
    // Written by this server (store/analyses.ts) from a mask it decoded, so read back as is.
    ...(row.mask ? { mask: JSON.parse(row.mask) as RleMask } : {}),
    place: slices ? placeOf(slices, { instance_uid: row.instance_uid, frame: row.frame, width: row.width, height: row.height }, row.localization !== 'image') : null,
    ...(decision
      ? {
          threshold: byModel ? decision.thresholds[row.label] ?? null : null,
          model_version: byModel ? decision.modelVersion : null,
          operating_point: byModel ? decision.operatingPoint : null,
        }
      : {}),
  };
}

/** Loads the latest analyses of many scans with two queries, whatever the page size. */
export async function loadLatestAnalyses(
  db: Database,
  rows: readonly ScanRow[],
): Promise<{ analyses: Map<number, AnalysisRow>; findings: Map<number, FindingRow[]> }> {
  const ids = rows.flatMap((row) => (row.latest_analysis_ref === null ? [] : [row.latest_analysis_ref]));
  return await findAnalysesWithFindings(db, ids);
}

/** `slices` numbers the triage reason's slice; without it the reason names no slice. */
export function toScan(row: ScanRow, findings: readonly SummaryFinding[] | undefined, analysis: SummaryAnalysis | undefined, slices?: SliceIndex): Scan {
  // Findings arrive ordered by confidence, so the first is the worklist's "top" finding.
  const top = findings?.[0];
  return {
    scan_id: row.scan_id,
    patient_id: row.patient_id,
    study_uid: row.study_uid,
    study_date: row.study_date,
    study_description: row.study_description,
    accession_number: row.accession_number,
    modality: row.modality,
    body_part: row.body_part,
    description: row.description,
    series_number: row.series_number,
    instance_count: row.instance_count,
    status: row.status,
    status_reason: row.status_reason,
    ai_summary: top && analysis ? { label: top.label, confidence: top.confidence, analysis_id: analysis.public_id, review: top.review } : null,
    triage: triageOf(analysis, findings ?? [], slices),
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function toScanResult(
  row: Pick<ScanRow, 'patient_id' | 'scan_id' | 'modality'>,
  analysis: ShownAnalysis,
  findings: readonly ShownFinding[],
  filter: FindingFilter,
  slices?: SliceIndex,
): ScanResultV11 {
  const decision = decisionOfAnalysis(analysis);
  const shown = findings.filter((f) => keepFinding(f, filter)).map((f) => toFinding(f, slices, decision));
  return {
    patient_id: row.patient_id,
    scan_id: row.scan_id,
    modality: row.modality,
    findings: shown,
    lesions: groupLesions(shown),
    recommendation: analysis.recommendation ?? '',
    analysis: {
      id: analysis.public_id,
      model: { id: analysis.model_id, name: analysis.model_name, version: analysis.model_version, sha256: analysis.model_sha256 },
      thresholds: decision.thresholds,
      operating_point: decision.operatingPoint,
      started_at: analysis.started_at,
      finished_at: analysis.finished_at,
    },
  };
}
