/**
 * SQL for the audit trail. Events are appended; two things change them afterwards: a counted
 * refusal adds one to its row's count, and retention moves old rows to archive files
 * (server/audit/retention.ts) in the transaction that deletes them.
 */
import { allOf } from '#server/store/conditions.ts';
import { inJsonIds, jsonElements, perDialect, type Database } from '#server/store/database.ts';
import type { PageRequest } from '#server/store/page.ts';

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
  /** The client's address: recorded for refused and throttled requests. */
  address: string | null;
  /** How many requests the row stands for: above 1 only for counted refusals. */
  count: number;
};

export type AuditInput = Omit<AuditRow, 'id' | 'patient_ids' | 'address' | 'count'> & {
  patient_ids?: readonly string[] | null;
  address?: string | null;
};

/** Every column but the bucket, which only finds a counted row again within its minute. */
const COLUMNS = 'id, at, request_id, key_id, user_id, action, target, patient_id, outcome, status_code, patient_ids, address, count';

function boundValues(event: AuditInput): Omit<AuditRow, 'id' | 'count'> {
  return {
    ...event,
    patient_ids: event.patient_ids && event.patient_ids.length > 0 ? JSON.stringify(event.patient_ids) : null,
    address: event.address ?? null,
  };
}

const AUDIT_COLUMNS = 'at, request_id, key_id, user_id, action, target, patient_id, outcome, status_code, patient_ids, address';

/** Many events with one statement and one commit, in the array's order (the audit writer's batches). */
export async function insertAuditEvents(db: Database, events: readonly AuditInput[]): Promise<void> {
  if (events.length === 0) return;
  await db.run(INSERT_MANY, [JSON.stringify(events.map(boundValues))]);
}

const INSERT_MANY = perDialect((d) =>
  d === 'postgres'
    ? `INSERT INTO audit_events (${AUDIT_COLUMNS})
       SELECT ${AUDIT_COLUMNS} FROM json_populate_recordset(NULL::audit_events, ?::json) WITH ORDINALITY AS e ORDER BY ordinality`
    : `INSERT INTO audit_events (${AUDIT_COLUMNS})
       SELECT ${AUDIT_COLUMNS.split(', ').map((c) => `value ->> '$.${c}'`).join(', ')} FROM json_each(?) ORDER BY key`,
);

export async function insertAuditEvent(db: Database, event: AuditInput): Promise<void> {
  (await db.run(`INSERT INTO audit_events (at, request_id, key_id, user_id, action, target, patient_id, outcome, status_code, patient_ids, address)
     VALUES (@at, @request_id, @key_id, @user_id, @action, @target, @patient_id, @outcome, @status_code, @patient_ids, @address)`, boundValues(event)));
}

/**
 * Adds one to the row of `bucket`, or starts it with this event. The update comes first: an
 * INSERT that meets its conflict would still use up an AUTOINCREMENT id.
 */
export async function countAuditEvent(db: Database, event: AuditInput, bucket: string): Promise<void> {
  if ((await db.run('UPDATE audit_events SET count = count + 1 WHERE bucket = ?', [bucket])) > 0) return;
  (await db.run(`INSERT INTO audit_events (at, request_id, key_id, user_id, action, target, patient_id, outcome, status_code, patient_ids, address, bucket)
     VALUES (@at, @request_id, @key_id, @user_id, @action, @target, @patient_id, @outcome, @status_code, @patient_ids, @address, @bucket)
     ON CONFLICT (bucket) WHERE bucket IS NOT NULL DO UPDATE SET count = audit_events.count + 1`, { ...boundValues(event), bucket }));
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

/**
 * Live rows after the cursor that match, in page order: limit + 1 of them, so the caller can
 * tell whether another page exists once archived rows are merged in (server/audit/audit.ts).
 */
export async function findAuditEvents(db: Database, filter: AuditFilter, page: PageRequest): Promise<AuditRow[]> {
  return (await db.all(perDialect((d) => `SELECT ${COLUMNS} FROM audit_events
       WHERE ${filter.newestFirst ? 'id < @after' : 'id > @after'}
         AND ${allOf([
           filter.action !== undefined && 'action = @action',
           filter.userId !== undefined && 'user_id = @userId',
           filter.patientId !== undefined &&
             `(patient_id = @patientId OR (patient_ids IS NOT NULL AND EXISTS (SELECT 1 FROM ${jsonElements(d, 'patient_ids')} WHERE value = @patientId)))`,
           filter.since !== undefined && 'at >= @since',
           filter.until !== undefined && 'at < @until',
         ])}
       ORDER BY id ${filter.newestFirst ? 'DESC' : 'ASC'} LIMIT @limit`), {
      after: cursorId(filter, page),
      action: filter.action ?? null,
      userId: filter.userId ?? null,
      patientId: filter.patientId ?? null,
      since: filter.since ?? null,
      until: filter.until ?? null,
      limit: page.limit + 1,
    })) as AuditRow[];
}

/** Newest first starts above every id; the cursor is then the last (lowest) id seen. */
export function cursorId(filter: AuditFilter, page: PageRequest): number {
  return filter.newestFirst && page.afterId === 0 ? Number.MAX_SAFE_INTEGER : page.afterId;
}

/** The oldest rows recorded before `cutoff`, in id order: one batch for the archive. */
export async function expiredAuditEvents(db: Database, cutoff: string, limit: number, maxId = Number.MAX_SAFE_INTEGER): Promise<AuditRow[]> {
  return (await db.all(`SELECT ${COLUMNS} FROM audit_events WHERE at < ? AND id <= ? ORDER BY id LIMIT ?`, [cutoff, maxId, limit])) as AuditRow[];
}

/** A workstation's own events after `afterId`, in order, with whether each is a counted row. */
export async function readOwnAuditAfter(db: Database, afterId: number, limit: number): Promise<(AuditRow & { counted: number })[]> {
  return (await db.all(`SELECT ${COLUMNS}, CASE WHEN bucket IS NULL THEN 0 ELSE 1 END AS counted FROM audit_events
     WHERE id > ? AND device_id IS NULL ORDER BY id LIMIT ?`, [afterId, limit])) as (AuditRow & { counted: number })[];
}

export type DeviceAuditEvent = Omit<AuditRow, 'id' | 'patient_ids'> & { seq: number; patient_ids: string | null };

/** A workstation's events on the hub, each under its device and number; one seen before is skipped. */
export async function insertDeviceAuditEvents(db: Database, deviceId: string, events: readonly DeviceAuditEvent[]): Promise<number> {
  let stored = 0;
  for (const e of events) {
    stored += await db.run(`INSERT INTO audit_events (at, request_id, key_id, user_id, action, target, patient_id, outcome, status_code, patient_ids, address, count, device_id, device_seq)
       VALUES (@at, @request_id, @key_id, @user_id, @action, @target, @patient_id, @outcome, @status_code, @patient_ids, @address, @count, @device_id, @seq)
       ON CONFLICT (device_id, device_seq) WHERE device_id IS NOT NULL DO NOTHING`, { ...e, device_id: deviceId });
  }
  return stored;
}

/** Which of `ids` are still in the table (an archive run interrupted before its delete). */
export async function liveAuditIds(db: Database, ids: readonly number[]): Promise<number[]> {
  return ((await db.all(perDialect((d) => `SELECT id FROM audit_events WHERE id ${inJsonIds(d)} ORDER BY id`), [JSON.stringify(ids)])) as { id: number }[])
    .map((row) => row.id);
}

export async function deleteAuditEvents(db: Database, ids: readonly number[]): Promise<number> {
  return (await db.run(perDialect((d) => `DELETE FROM audit_events WHERE id ${inJsonIds(d)}`), [JSON.stringify(ids)]));
}

export type AuditArchiveRecord = {
  file: string;
  sha256: string;
  bytes: number;
  rows: number;
  first_id: number;
  last_id: number;
  first_at: string;
  last_at: string;
  archived_at: string;
};

const ARCHIVE_COLUMNS = 'file, sha256, bytes, rows, first_id, last_id, first_at, last_at, archived_at';

export async function insertAuditArchive(db: Database, record: AuditArchiveRecord): Promise<void> {
  (await db.run(`INSERT INTO audit_archives (${ARCHIVE_COLUMNS})
     VALUES (@file, @sha256, @bytes, @rows, @first_id, @last_id, @first_at, @last_at, @archived_at)`, record));
}

export async function auditArchiveRecorded(db: Database, file: string): Promise<boolean> {
  return (await db.get('SELECT 1 FROM audit_archives WHERE file = ?', [file])) !== undefined;
}

/**
 * Archives that may hold events of a page: ids past the cursor, times meeting since/until; in
 * page order (by first id, or by last id newest first), so a reader can stop at the first one
 * that can no longer reach the page.
 */
export async function auditArchivesFor(db: Database, filter: AuditFilter, page: PageRequest): Promise<AuditArchiveRecord[]> {
  return (await db.all(`SELECT ${ARCHIVE_COLUMNS} FROM audit_archives
       WHERE ${filter.newestFirst ? 'first_id < @after' : 'last_id > @after'}
         AND (CAST(@since AS TEXT) IS NULL OR last_at >= @since)
         AND (CAST(@until AS TEXT) IS NULL OR first_at < @until)
       ORDER BY ${filter.newestFirst ? 'last_id DESC' : 'first_id ASC'}`, { after: cursorId(filter, page), since: filter.since ?? null, until: filter.until ?? null })) as AuditArchiveRecord[];
}
