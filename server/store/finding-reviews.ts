/** SQL for locating a finding with the scan and patient it belongs to (for review and audit). */
import type { FindingRow } from '#server/store/analyses.ts';
import type { Database } from '#server/store/database.ts';

export type FindingWithScan = FindingRow & { scan_id: string; patient_id: string };

export function findFindingWithScan(db: Database, publicId: string): FindingWithScan | undefined {
  return db
    .prepare(
      `SELECT f.*, s.scan_id, p.patient_id
       FROM findings f
       JOIN analyses a ON a.id = f.analysis_ref
       JOIN scans s ON s.id = a.scan_ref
       JOIN studies st ON st.id = s.study_ref
       JOIN patients p ON p.id = st.patient_ref
       WHERE f.public_id = ?`,
    )
    .get(publicId) as FindingWithScan | undefined;
}
