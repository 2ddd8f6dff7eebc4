/** SQL for analyses and their findings. */
import type { FindingReview, Urgency } from '#common/vocabulary.ts';
import { inJsonIds, perDialect, type Database } from '#server/store/database.ts';
import { newPublicId } from '#server/store/public-id.ts';

/** Label -> its urgency and display name in the manifest an analysis ran with (worklist triage). */
export type TriageLabels = Record<string, { urgency: Urgency; display_name: string }>;

export type AnalysisRow = {
  id: number;
  public_id: string;
  scan_ref: number;
  model_id: string;
  model_name: string;
  model_version: string;
  model_sha256: string;
  thresholds: string;
  /** JSON TriageLabels from the manifest the analysis ran with (migration 13). */
  triage_labels: string;
  status: 'queued' | 'running' | 'succeeded' | 'failed' | 'not_applicable' | 'cancelled';
  error: string | null;
  recommendation: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  slices_done: number;
  slices_total: number | null;
  owner_node: number | null;
  owner_pid: number | null;
  heartbeat_at: string | null;
  requested_by: string | null;
  /** Times the process running this job died under it (migration 5). */
  interruptions: number;
  /** The model's operating point its thresholds came from (migration 30); null without one. */
  operating_point: string | null;
};

export type FindingRow = {
  id: number;
  public_id: string;
  analysis_ref: number;
  label: string;
  confidence: number;
  x: number;
  y: number;
  width: number;
  height: number;
  instance_uid: string;
  frame: number;
  review: FindingReview | null;
  reviewed_by: number | null;
  reviewed_at: string | null;
  /** 'reader': drawn by a radiologist (created_by) on the analysis the model's findings are on. */
  source: 'model' | 'reader';
  created_by: number | null;
  /** Why the reader rejected it, when they said. */
  review_reason: string | null;
  /** Verdicts made apart disagree (sync, migration 17); a new verdict settles it. */
  review_disputed: 0 | 1;
};

export type FindingInput = {
  label: string;
  confidence: number;
  x: number;
  y: number;
  width: number;
  height: number;
  instanceUid: string;
  frame: number;
};

export type CompletedAnalysisInput = {
  scanRef: number;
  model: { id: string; name: string; version: string; sha256: string };
  thresholds: Record<string, number>;
  operatingPoint?: string | null;
  /** Labels not named are routine. */
  triageLabels?: TriageLabels;
  recommendation: string;
  findings: readonly FindingInput[];
  startedAt: string;
  finishedAt: string;
};

/** Stores a finished analysis with its findings and makes it the scan's result; the caller wraps
 * it in a transaction. */
export async function insertCompletedAnalysis(db: Database, input: CompletedAnalysisInput): Promise<AnalysisRow> {
  const analysis = (await db.get(`INSERT INTO analyses (public_id, scan_ref, model_id, model_name, model_version, model_sha256, thresholds,
         triage_labels, operating_point, status, recommendation, created_at, started_at, finished_at)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'succeeded', ?, ?, ?, ?) RETURNING *`, [newPublicId('ana'), input.scanRef, input.model.id, input.model.name, input.model.version, input.model.sha256, JSON.stringify(input.thresholds), JSON.stringify(input.triageLabels ?? {}), input.operatingPoint ?? null, input.recommendation, input.startedAt, input.startedAt, input.finishedAt])) as AnalysisRow;
  await insertFindings(db, analysis.id, input.findings);
  (await db.run('UPDATE scans SET latest_analysis_ref = ? WHERE id = ?', [analysis.id, input.scanRef]));
  return analysis;
}

/** Stores the findings of one analysis; the caller's transaction also records the analysis. */
export async function insertFindings(db: Database, analysisRef: number, findings: readonly FindingInput[]): Promise<void> {
  for (const f of findings) {
    await db.run(
      `INSERT INTO findings (public_id, analysis_ref, label, confidence, x, y, width, height, instance_uid, frame)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [newPublicId('fnd'), analysisRef, f.label, f.confidence, f.x, f.y, f.width, f.height, f.instanceUid, f.frame],
    );
  }
}

const ANALYSES_BY_IDS = perDialect((d) => `SELECT * FROM analyses WHERE id ${inJsonIds(d)}`);

export async function findAnalysesByIds(db: Database, ids: readonly number[]): Promise<Map<number, AnalysisRow>> {
  if (ids.length === 0) return new Map();
  const rows = (await db.all(ANALYSES_BY_IDS, [JSON.stringify(ids)])) as AnalysisRow[];
  return new Map(rows.map((row) => [row.id, row]));
}

const FINDINGS_BY_ANALYSES = perDialect(
  (d) => `SELECT * FROM findings WHERE analysis_ref ${inJsonIds(d)} ORDER BY analysis_ref, source = 'reader', confidence DESC, id`,
);

/** Findings of several analyses at once, ordered by confidence, highest first. */
export async function findFindingsByAnalyses(db: Database, analysisIds: readonly number[]): Promise<Map<number, FindingRow[]>> {
  const byAnalysis = new Map<number, FindingRow[]>();
  if (analysisIds.length === 0) return byAnalysis;
  const rows = (await db.all(FINDINGS_BY_ANALYSES, [JSON.stringify(analysisIds)])) as FindingRow[];
  for (const row of rows) {
    const list = byAnalysis.get(row.analysis_ref) ?? [];
    list.push(row);
    byAnalysis.set(row.analysis_ref, list);
  }
  return byAnalysis;
}

// One round trip on PostgreSQL: each analysis carries its findings as a JSON array, in the order
// FINDINGS_BY_ANALYSES gives (json_agg writes bigint and double precision as JSON numbers that
// read back as the same values). On a hub every statement costs a network write and a wakeup of
// the backend; a page of results saved one of its five this way.
const ANALYSES_WITH_FINDINGS = perDialect(
  (d) => `SELECT a.*, (SELECT json_agg(f ORDER BY f.source = 'reader', f.confidence DESC, f.id) FROM findings f WHERE f.analysis_ref = a.id) AS findings_json
          FROM analyses a WHERE a.id ${inJsonIds(d)}`,
);

/** Analyses by id with their findings (ordered as findFindingsByAnalyses orders them). */
export async function findAnalysesWithFindings(
  db: Database,
  ids: readonly number[],
): Promise<{ analyses: Map<number, AnalysisRow>; findings: Map<number, FindingRow[]> }> {
  if (db.dialect === 'sqlite' || ids.length === 0) {
    // In-process statements cost no round trip, and reading rows beats building JSON there.
    return { analyses: await findAnalysesByIds(db, ids), findings: await findFindingsByAnalyses(db, ids) };
  }
  const rows = (await db.all(ANALYSES_WITH_FINDINGS, [JSON.stringify(ids)])) as (AnalysisRow & { findings_json: FindingRow[] | null })[];
  const analyses = new Map<number, AnalysisRow>();
  const findings = new Map<number, FindingRow[]>();
  for (const { findings_json: own, ...analysis } of rows) {
    analyses.set(analysis.id, analysis);
    if (own) findings.set(analysis.id, own);
  }
  return { analyses, findings };
}

export async function findFindingByPublicId(db: Database, publicId: string): Promise<FindingRow | undefined> {
  return (await db.get('SELECT * FROM findings WHERE public_id = ?', [publicId])) as FindingRow | undefined;
}

export async function setFindingReview(
  db: Database,
  id: number,
  review: FindingReview | null,
  userRef: number | null,
  at: string | null,
  reason: string | null = null,
): Promise<void> {
  (await db.run('UPDATE findings SET review = ?, reviewed_by = ?, reviewed_at = ?, review_reason = ? WHERE id = ?', [review, userRef, at, reason, id]));
}

export type ReaderFindingInput = { label: string; x: number; y: number; width: number; height: number; instanceUid: string; frame: number };

/**
 * A finding drawn by a reader: accepted by its author as they draw it (they assert it), with
 * confidence 1 because the schema asks for one; lists put it after the model's findings.
 */
export async function insertReaderFinding(db: Database, analysisRef: number, input: ReaderFindingInput, userRef: number, at: string, publicId = newPublicId('fnd')): Promise<string> {
  (await db.run(`INSERT INTO findings (public_id, analysis_ref, label, confidence, x, y, width, height, instance_uid, frame,
       review, reviewed_by, reviewed_at, source, created_by)
     VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, ?, 'accepted', ?, ?, 'reader', ?)`, [publicId, analysisRef, input.label, input.x, input.y, input.width, input.height, input.instanceUid, input.frame, userRef, at, userRef]));
  return publicId;
}
