/** SQL for the audit trail: append-only; nothing in mia updates or deletes these rows. */
import { sql, type Database } from '#server/store/database.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type AuditRow = {
  id: number;
  at: string;
  request_id: string | null;
  key_id: string | null;
  user_id: string | null;
  action: string;
  target: string | null;
  patient_id: string | null;
  outcome: string;
  status_code: number | null;
  /** JSON array of patient ids, for reads and exports that reach more than one. */
  patient_ids: string | null;
};

export type AuditInput = Omit<AuditRow, 'id' | 'patient_ids'> & { patient_ids?: readonly string[] | null };

export function insertAuditEvent(db: Database, event: AuditInput): void {
  sql(db,
    `INSERT INTO audit_events (at, request_id, key_id, user_id, action, target, patient_id, outcome, status_code, patient_ids)
     VALUES (@at, @request_id, @key_id, @user_id, @action, @target, @patient_id, @outcome, @status_code, @patient_ids)`,
  ).run({ ...event, patient_ids: event.patient_ids && event.patient_ids.length > 0 ? JSON.stringify(event.patient_ids) : null });
}

export type AuditFilter = {
  action?: string | undefined;
  userId?: string | undefined;
  patientId?: string | undefined;
  since?: string | undefined;
  until?: string | undefined;
  /** Pages run backwards: a page's cursor is then the id the next page stays below. */
  newestFirst?: boolean;
};

export function listAuditEvents(db: Database, filter: AuditFilter, page: PageRequest): Page<AuditRow> {
  const rows = sql(db,
      `SELECT * FROM audit_events
       WHERE ${filter.newestFirst ? 'id < @after' : 'id > @after'}
         AND (@action IS NULL OR action = @action)
         AND (@userId IS NULL OR user_id = @userId)
         AND (@patientId IS NULL OR patient_id = @patientId
              OR (patient_ids IS NOT NULL AND EXISTS (SELECT 1 FROM json_each(patient_ids) WHERE value = @patientId)))
         AND (@since IS NULL OR at >= @since)
         AND (@until IS NULL OR at < @until)
       ORDER BY id ${filter.newestFirst ? 'DESC' : 'ASC'} LIMIT @limit`,
    )
    .all({
      // Newest first starts above every id; the cursor is then the last (lowest) id seen.
      after: filter.newestFirst && page.afterId === 0 ? Number.MAX_SAFE_INTEGER : page.afterId,
      action: filter.action ?? null,
      userId: filter.userId ?? null,
      patientId: filter.patientId ?? null,
      since: filter.since ?? null,
      until: filter.until ?? null,
      limit: page.limit + 1,
    }) as AuditRow[];
  return toPage(rows, page.limit);
}
