/**
 * SQL for the worklist's view of each scan's latest analysis (GET /v1/studies, /v1/scans): the
 * few columns its AI summary and triage read, as arrays (Database.values). Reading whole analysis
 * and finding rows as objects was the largest part of a studies page (cpu-prof, 2026-11-26:
 * findAnalysesWithFindings 0.93 ms of a 50-study request at 50 connections), as it was for
 * results pages (store/results.ts).
 */
import { inJsonIds, perDialect, type Database } from '#server/store/database.ts';
import type { AnalysisRow, FindingRow } from '#server/store/analyses.ts';

/** What a scan's AI summary and triage read of its latest analysis. */
export type SummaryAnalysis = Pick<AnalysisRow, 'id' | 'public_id' | 'thresholds' | 'triage_labels'>;

/** What a scan's AI summary and triage read of a finding. */
export type SummaryFinding = Pick<FindingRow, 'id' | 'analysis_ref' | 'public_id' | 'label' | 'confidence' | 'review' | 'source' | 'instance_uid' | 'frame'>;

const FINDING_COLUMNS = 'id, analysis_ref, public_id, label, confidence, review, source, instance_uid, frame';

const ANALYSES = perDialect((d) => `SELECT id, public_id, thresholds, triage_labels FROM analyses WHERE id ${inJsonIds(d)}`);

// Unordered, like results.ts: sorted per analysis below instead of in a temporary B-tree.
const FINDINGS = perDialect((d) => `SELECT ${FINDING_COLUMNS} FROM findings WHERE analysis_ref ${inJsonIds(d)}`);

// One round trip on PostgreSQL (a hub): each analysis carries its findings as arrays in
// FINDING_COLUMNS' order (json_build_array writes bigint and double precision as JSON numbers).
const ANALYSES_WITH_FINDINGS = `SELECT a.id, a.public_id, a.thresholds, a.triage_labels,
       (SELECT json_agg(json_build_array(${FINDING_COLUMNS})) FROM findings f WHERE f.analysis_ref = a.id)
  FROM analyses a WHERE a.id ${inJsonIds('postgres')}`;

/** findFindingsByAnalyses' order: the model's by confidence, highest first, then the reader's. */
function byShownOrder(a: SummaryFinding, b: SummaryFinding): number {
  return Number(a.source === 'reader') - Number(b.source === 'reader') || b.confidence - a.confidence || a.id - b.id;
}

function toAnalysis(v: readonly unknown[]): SummaryAnalysis {
  return { id: Number(v[0]), public_id: v[1] as string, thresholds: v[2] as string, triage_labels: v[3] as string };
}

function toFinding(v: readonly unknown[]): SummaryFinding {
  return {
    id: Number(v[0]),
    analysis_ref: Number(v[1]),
    public_id: v[2] as string,
    label: v[3] as string,
    confidence: v[4] as number,
    review: v[5] as SummaryFinding['review'],
    source: v[6] as SummaryFinding['source'],
    instance_uid: v[7] as string,
    frame: v[8] as number,
  };
}

/** Analyses by id with their findings, each analysis's in the order a reader is shown them. */
export async function findSummaryAnalyses(
  db: Database,
  ids: readonly number[],
): Promise<{ analyses: Map<number, SummaryAnalysis>; findings: Map<number, SummaryFinding[]> }> {
  const analyses = new Map<number, SummaryAnalysis>();
  const findings = new Map<number, SummaryFinding[]>();
  if (ids.length === 0) return { analyses, findings };
  const param = [JSON.stringify(ids)];
  if (db.dialect === 'sqlite') {
    for (const v of await db.values(ANALYSES, param)) {
      const analysis = toAnalysis(v);
      analyses.set(analysis.id, analysis);
    }
    for (const v of await db.values(FINDINGS, param)) {
      const finding = toFinding(v);
      const list = findings.get(finding.analysis_ref);
      if (list) list.push(finding);
      else findings.set(finding.analysis_ref, [finding]);
    }
  } else {
    for (const v of await db.values(ANALYSES_WITH_FINDINGS, param)) {
      const analysis = toAnalysis(v);
      analyses.set(analysis.id, analysis);
      const own = v[4] as unknown[][] | null;
      if (own) findings.set(analysis.id, own.map(toFinding));
    }
  }
  for (const list of findings.values()) if (list.length > 1) list.sort(byShownOrder);
  return { analyses, findings };
}
