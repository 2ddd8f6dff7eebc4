/**
 * SQL for pages of analysis results (GET /v1/scan/results and the exports that list them): each
 * scan with its latest analysis in one statement, then the findings of the page in a second,
 * reading only the columns a result shows. Reading whole scan, analysis and finding rows, the
 * analyses in a statement of their own, was three quarters of a results request's CPU at 50
 * connections (cpu-prof, 2026-11-26): better-sqlite3 builds an object per row with a property
 * per column, so columns nobody reads still cost (500 results: 8.9 -> 3.4 ms of statements).
 * Rows come back as arrays (Database.values) and become objects here, in one fixed shape.
 */
import { inJsonIds, perDialect, type Database } from '#server/store/database.ts';
import type { AnalysisRow, FindingRow } from '#server/store/analyses.ts';
import { allOf } from '#server/store/conditions.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';
import type { ResultFilter } from '#server/store/scans.ts';

/** A scan's latest analysis, as a result shows it. */
export type ResultAnalysis = Pick<
  AnalysisRow,
  'public_id' | 'model_id' | 'model_name' | 'model_version' | 'model_sha256' | 'thresholds' | 'operating_point' | 'recommendation' | 'started_at' | 'finished_at'
>;

/** A scan and its latest analysis, as a result shows them. */
export type ResultRow = {
  /** The scan's row id (the page's keyset). */
  id: number;
  /** Its instance rows: findings' places are kept while this holds (findings/known-places.ts). */
  instance_count: number;
  scan_id: string;
  patient_id: string;
  modality: string;
  analysis_ref: number;
  analysis: ResultAnalysis;
};

export type ResultFindingRow = Pick<
  FindingRow,
  'id' | 'analysis_ref' | 'public_id' | 'label' | 'confidence' | 'x' | 'y' | 'width' | 'height' | 'instance_uid' | 'frame' | 'review' | 'source' | 'review_reason' | 'review_disputed' | 'localization' | 'mask'
>;

/** The WHERE of a results list and its values; with a label or confidence filter, only scans
 * whose latest analysis has a matching finding. */
function resultConditions(filter: ResultFilter): { where: string; params: Record<string, string | number | null> } {
  const findingFilter =
    filter.label === undefined && filter.minConfidence === undefined
      ? ''
      : ` AND EXISTS (SELECT 1 FROM findings f WHERE f.analysis_ref = a.id AND ${allOf([
          filter.label !== undefined && 'f.label = @label',
          filter.minConfidence !== undefined && 'f.confidence >= @minConfidence',
        ])})`;
  const where = allOf([
    filter.patientId !== undefined && 'p.patient_id = @patientId',
    filter.modality !== undefined && 's.modality = @modality',
    filter.status !== undefined && 's.status = @status',
    filter.scanId !== undefined && 's.scan_id = @scanId',
    filter.throughId !== undefined && 's.id <= @throughId',
  ]);
  return {
    where: `${where}${findingFilter}`,
    params: {
      patientId: filter.patientId ?? null,
      modality: filter.modality ?? null,
      status: filter.status ?? null,
      scanId: filter.scanId ?? null,
      label: filter.label ?? null,
      minConfidence: filter.minConfidence ?? null,
      throughId: filter.throughId ?? null,
    },
  };
}

const RESULT_FROM = `FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref
       JOIN analyses a ON a.id = s.latest_analysis_ref`;

/** The lowest and highest scan row ids (null with no scans): where an export cuts the list into ranges. */
export async function scanIdSpan(db: Database): Promise<{ first: number; last: number } | null> {
  const [row] = await db.values('SELECT min(id), max(id) FROM scans');
  return row?.[0] == null ? null : { first: Number(row[0]), last: Number(row[1]) };
}

/** Scans with a latest analysis (resultConditions), a page of them. */
export async function listResultRows(db: Database, filter: ResultFilter, page: PageRequest): Promise<Page<ResultRow>> {
  const { where, params } = resultConditions(filter);
  const rows = (await db.values(
    `SELECT s.id, s.scan_id, p.patient_id, s.modality, a.id AS analysis_ref, a.public_id,
            a.model_id, a.model_name, a.model_version, a.model_sha256, a.recommendation, a.started_at, a.finished_at,
            a.thresholds, a.operating_point, s.instance_count
       ${RESULT_FROM}
      WHERE s.id > @after AND ${where}
      ORDER BY s.id LIMIT @limit`,
    { ...params, after: page.afterId, limit: page.limit + 1 },
  )).map(
    (v): ResultRow => ({
      id: v[0] as number,
      scan_id: v[1] as string,
      patient_id: v[2] as string,
      modality: v[3] as string,
      analysis_ref: v[4] as number,
      instance_count: v[15] as number,
      analysis: {
        public_id: v[5] as string,
        model_id: v[6] as string,
        model_name: v[7] as string,
        model_version: v[8] as string,
        model_sha256: v[9] as string,
        recommendation: v[10] as string | null,
        started_at: v[11] as string | null,
        finished_at: v[12] as string | null,
        thresholds: v[13] as string,
        operating_point: v[14] as string | null,
      },
    }),
  );
  return toPage(rows, page.limit);
}

// Unordered: no index gives findFindingsByAnalyses' order (below), so an ORDER BY made SQLite
// sort the whole page in a temporary B-tree; an analysis has a handful of findings, sorted here
// instead (500 results: the statement 1.08 -> 0.97 ms at best, 2.43 -> 2.24 at the median of 20
// interleaved rounds on a loaded machine, 2026-11-26).
const RESULT_FINDINGS = perDialect(
  (d) => `SELECT analysis_ref, public_id, label, confidence, x, y, width, height, instance_uid, frame, review, source, review_reason, review_disputed, localization, id, mask
            FROM findings WHERE analysis_ref ${inJsonIds(d)}`,
);

/** findFindingsByAnalyses' order: the model's by confidence, highest first, then the reader's. */
function byShownOrder(a: ResultFindingRow, b: ResultFindingRow): number {
  return Number(a.source === 'reader') - Number(b.source === 'reader') || b.confidence - a.confidence || a.id - b.id;
}

/** The findings of several analyses, by analysis, each in findFindingsByAnalyses' order. */
export async function findResultFindings(db: Database, analysisRefs: readonly number[]): Promise<Map<number, ResultFindingRow[]>> {
  const byAnalysis = new Map<number, ResultFindingRow[]>();
  if (analysisRefs.length === 0) return byAnalysis;
  for (const v of await db.values(RESULT_FINDINGS, [JSON.stringify(analysisRefs)])) {
    const row: ResultFindingRow = {
      analysis_ref: v[0] as number,
      public_id: v[1] as string,
      label: v[2] as string,
      confidence: v[3] as number,
      x: v[4] as number,
      y: v[5] as number,
      width: v[6] as number,
      height: v[7] as number,
      instance_uid: v[8] as string,
      frame: v[9] as number,
      review: v[10] as ResultFindingRow['review'],
      source: v[11] as ResultFindingRow['source'],
      review_reason: v[12] as string | null,
      review_disputed: v[13] as ResultFindingRow['review_disputed'],
      localization: v[14] as ResultFindingRow['localization'],
      id: v[15] as number,
      mask: v[16] as string | null,
    };
    const list = byAnalysis.get(row.analysis_ref);
    if (list) list.push(row);
    else byAnalysis.set(row.analysis_ref, [row]);
  }
  for (const list of byAnalysis.values()) if (list.length > 1) list.sort(byShownOrder);
  return byAnalysis;
}
