/** SQL for sync's anti-entropy digest: each synced row as one line, in one order on both backends. */
import { jsonElements, perDialect, type Database } from '#server/store/database.ts';

const STUDY_FILTER = (d: 'sqlite' | 'postgres'): string => `(CAST(? AS TEXT) IS NULL OR st.study_uid IN (SELECT value FROM ${jsonElements(d, '?')}))`;

// Byte order (COLLATE "C" on PostgreSQL) so both backends sort the lines alike.
const INSTANCES = perDialect((d) => `SELECT i.sop_instance_uid AS k, i.file_sha256 AS v FROM instances i
  JOIN scans s ON s.id = i.scan_ref JOIN studies st ON st.id = s.study_ref
  WHERE ${STUDY_FILTER(d)} ORDER BY i.sop_instance_uid${d === 'postgres' ? ' COLLATE "C"' : ''}`);

const ANALYSES = perDialect((d) => `SELECT a.public_id AS k, s.scan_id || ' ' || a.model_sha256 || ' ' || COALESCE(a.finished_at, '') || ' ' ||
    COALESCE((SELECT ${d === 'postgres' ? "string_agg(f.public_id, ',' ORDER BY f.public_id COLLATE \"C\")" : "group_concat(public_id, ',') FROM (SELECT f.public_id"} FROM findings f WHERE f.analysis_ref = a.id AND f.source = 'model'${d === 'postgres' ? '' : ' ORDER BY f.public_id)'}), '') AS v
  FROM analyses a JOIN scans s ON s.id = a.scan_ref JOIN studies st ON st.id = s.study_ref
  WHERE a.status = 'succeeded' AND ${STUDY_FILTER(d)} ORDER BY a.public_id${d === 'postgres' ? ' COLLATE "C"' : ''}`);

// Every verdict event, and the verdict its finding shows (derived from the events).
const REVIEWS = perDialect((d) => `SELECT e.event_id AS k, f.public_id || ' ' || COALESCE(e.verdict, 'cleared') || ' ' || e.hlc || ' ' ||
    COALESCE(f.review, 'none') || ' ' || f.review_disputed AS v
  FROM review_events e JOIN findings f ON f.id = e.finding_ref JOIN analyses a ON a.id = f.analysis_ref
  JOIN scans s ON s.id = a.scan_ref JOIN studies st ON st.id = s.study_ref
  WHERE ${STUDY_FILTER(d)} ORDER BY e.event_id${d === 'postgres' ? ' COLLATE "C"' : ''}`);

// Reports with what a reader wrote and signed (a draft's derived snapshot is not compared), their
// addenda, their conflicts, the scans archived, and the findings readers drew.
const C = (d: 'sqlite' | 'postgres'): string => (d === 'postgres' ? ' COLLATE "C"' : '');
const REPORTS = perDialect((d) => `SELECT k, v FROM (
    SELECT r.public_id AS k, 'report ' || r.status || ' ' || au.public_id || ' ' || COALESCE(r.final_hlc, '') || ' ' || COALESCE(fu.public_id, '') || ' ' ||
      r.impression || ' | ' || CASE WHEN r.status = 'final' OR r.recommendation_basis = 'reader' THEN r.recommendation ELSE '' END AS v
    FROM reports r JOIN users au ON au.id = r.author_ref LEFT JOIN users fu ON fu.id = r.finalized_by
    JOIN scans s ON s.id = r.scan_ref JOIN studies st ON st.id = s.study_ref WHERE ${STUDY_FILTER(d)}
    UNION ALL
    SELECT ad.public_id AS k, 'addendum ' || r.public_id || ' ' || u.public_id || ' ' || ad.created_at || ' ' || ad.text AS v
    FROM report_addenda ad JOIN reports r ON r.id = ad.report_ref JOIN users u ON u.id = ad.author_ref
    JOIN scans s ON s.id = r.scan_ref JOIN studies st ON st.id = s.study_ref WHERE ${STUDY_FILTER(d)}
    UNION ALL
    SELECT r.public_id || ':' || c.field || ':' || c.hlc AS k, 'conflict ' || COALESCE(c.user_id, '') || ' ' || c.value AS v
    FROM report_conflicts c JOIN reports r ON r.id = c.report_ref
    JOIN scans s ON s.id = r.scan_ref JOIN studies st ON st.id = s.study_ref WHERE ${STUDY_FILTER(d)}
    UNION ALL
    SELECT s.scan_id AS k, 'scan archived' AS v
    FROM scans s JOIN studies st ON st.id = s.study_ref WHERE s.status = 'archived' AND ${STUDY_FILTER(d)}
    UNION ALL
    SELECT f.public_id AS k, 'finding ' || a.public_id || ' ' || f.label || ' ' || f.instance_uid || ' ' || f.frame AS v
    FROM findings f JOIN analyses a ON a.id = f.analysis_ref JOIN scans s ON s.id = a.scan_ref JOIN studies st ON st.id = s.study_ref
    WHERE f.source = 'reader' AND ${STUDY_FILTER(d)}
  ) x ORDER BY k${C(d)}`);

export async function readDigestRows(db: Database, studies: readonly string[] | null): Promise<{ instances: string[]; analyses: string[]; reviews: string[]; reports: string[] }> {
  const list = studies === null ? null : JSON.stringify(studies);
  const params = [list, list];
  const lines = async (statement: typeof INSTANCES, p: unknown[] = params): Promise<string[]> => ((await db.all(statement, p)) as { k: string; v: string }[]).map((r) => `${r.k} ${r.v}`);
  return { instances: await lines(INSTANCES), analyses: await lines(ANALYSES), reviews: await lines(REVIEWS), reports: await lines(REPORTS, [list, list, list, list, list, list, list, list, list, list]) };
}
