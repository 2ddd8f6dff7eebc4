/** SQL for locating a finding with the scan and patient it belongs to (for review and audit). */
import type { FindingRow } from '#server/store/analyses.ts';
import type { ScanStatus } from '#common/vocabulary.ts';
import type { Database } from '#server/store/database.ts';

export type FindingWithScan = FindingRow & {
  scan_id: string;
  patient_id: string;
  scan_ref: number;
  scan_status: ScanStatus;
  /** Whether the finding belongs to the scan's current result (not an older analysis). */
  is_latest: 0 | 1;
};

export async function findFindingWithScan(db: Database, publicId: string): Promise<FindingWithScan | undefined> {
  return (await db.get(`SELECT f.*, s.scan_id, p.patient_id, s.id AS scan_ref, s.status AS scan_status,
              (s.latest_analysis_ref = a.id) AS is_latest
       FROM findings f
       JOIN analyses a ON a.id = f.analysis_ref
       JOIN scans s ON s.id = a.scan_ref
       JOIN studies st ON st.id = s.study_ref
       JOIN patients p ON p.id = st.patient_ref
       WHERE f.public_id = ?`, [publicId])) as FindingWithScan | undefined;
}

/** Findings of the scan's current result that nobody has accepted or rejected yet. */
export async function countUnreviewedFindings(db: Database, scanRef: number): Promise<number> {
  const row = (await db.get(`SELECT COUNT(*) AS n FROM findings f JOIN scans s ON s.latest_analysis_ref = f.analysis_ref
     WHERE s.id = ? AND f.review IS NULL`, [scanRef])) as { n: number };
  return row.n;
}
