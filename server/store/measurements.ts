/** SQL for a reader's measurements on a scan. */
import type { Database } from '#server/store/database.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type MeasurementRow = {
  id: number;
  public_id: string;
  scan_ref: number;
  scan_id: string;
  user_ref: number;
  instance_uid: string;
  frame: number;
  kind: string;
  points: string;
  length_mm: number | null;
  area_mm2: number | null;
  mean: number | null;
  sd: number | null;
  value: number | null;
  unit: string | null;
  created_at: string;
  /** The measured instance's stored pixel spacing (instances.ts decodeSpacing): its source labels the mm. */
  instance_spacing: string | null;
};

export type MeasurementInsert = Omit<MeasurementRow, 'id' | 'scan_id' | 'instance_uid' | 'instance_spacing'> & { instance_ref: number };

const SELECT = `
  SELECT m.id, m.public_id, m.scan_ref, s.scan_id, m.user_ref, i.sop_instance_uid AS instance_uid, m.frame, m.kind, m.points,
         m.length_mm, m.area_mm2, m.mean, m.sd, m.value, m.unit, m.created_at, i.pixel_spacing AS instance_spacing
  FROM measurements m JOIN scans s ON s.id = m.scan_ref JOIN instances i ON i.id = m.instance_ref`;

export async function insertMeasurement(db: Database, row: MeasurementInsert): Promise<void> {
  (await db.run(`INSERT INTO measurements (public_id, scan_ref, instance_ref, frame, user_ref, kind, points, length_mm, area_mm2, mean, sd, value, unit, created_at)
     VALUES (@public_id, @scan_ref, @instance_ref, @frame, @user_ref, @kind, @points, @length_mm, @area_mm2, @mean, @sd, @value, @unit, @created_at)`, row));
}

export async function listReaderMeasurements(db: Database, scanRef: number, userRef: number, page: PageRequest): Promise<Page<MeasurementRow>> {
  const rows = (await db.all(`${SELECT} WHERE m.scan_ref = ? AND m.user_ref = ? AND m.id > ? ORDER BY m.id LIMIT ?`, [scanRef, userRef, page.afterId, page.limit + 1])) as MeasurementRow[];
  return toPage(rows, page.limit);
}

/**
 * A report's measurements: its author's on its scan; a final report lists those made until it
 * was signed, so a measurement drawn later does not change a signed report.
 */
export async function listReportMeasurements(db: Database, scanRef: number, authorRef: number, until: string | null): Promise<MeasurementRow[]> {
  return (await db.all(`${SELECT} WHERE m.scan_ref = ? AND m.user_ref = ? AND (CAST(? AS TEXT) IS NULL OR m.created_at <= ?) ORDER BY m.id`, [scanRef, authorRef, until, until])) as MeasurementRow[];
}

export async function findMeasurement(db: Database, publicId: string): Promise<(MeasurementRow & { patient_id: string }) | undefined> {
  return (await db.get(`SELECT q.*, p.patient_id FROM (${SELECT} WHERE m.public_id = ?) q
     JOIN scans s ON s.scan_id = q.scan_id JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref`, [publicId])) as (MeasurementRow & { patient_id: string }) | undefined;
}

/** New geometry and the values computed from it; created_at stays (it places the measurement in or out of a report). */
export async function updateMeasurementGeometry(
  db: Database,
  id: number,
  change: Pick<MeasurementRow, 'points' | 'length_mm' | 'area_mm2' | 'mean' | 'sd' | 'value'>,
): Promise<void> {
  (await db.run(`UPDATE measurements SET points = @points, length_mm = @length_mm, area_mm2 = @area_mm2, mean = @mean, sd = @sd, value = @value
     WHERE id = @id`, { ...change, id }));
}

/**
 * The final report that lists a measurement (listReportMeasurements: its author's, on its scan,
 * made before signing), if any: changing the measurement would change what was signed.
 */
export async function findFinalReportListing(db: Database, row: Pick<MeasurementRow, 'scan_ref' | 'user_ref' | 'created_at'>): Promise<{ public_id: string; finalized_at: string } | undefined> {
  return (await db.get(`SELECT public_id, finalized_at FROM reports
     WHERE scan_ref = ? AND author_ref = ? AND status = 'final' AND finalized_at >= ? ORDER BY id LIMIT 1`, [row.scan_ref, row.user_ref, row.created_at])) as { public_id: string; finalized_at: string } | undefined;
}

export async function deleteMeasurement(db: Database, id: number): Promise<void> {
  (await db.run('DELETE FROM measurements WHERE id = ?', [id]));
}
