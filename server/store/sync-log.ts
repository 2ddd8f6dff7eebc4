/**
 * SQL for the hub's change log (docs/sync.md): appended in the transaction that makes the change,
 * read by workstations in `seq` order.
 *
 * A sequence alone would let a reader skip a change: two transactions take 9 and 10, 10 commits
 * first, a reader moves past it, 9 commits later and is never read. Every transaction that
 * appends therefore first takes one transaction-scoped advisory lock on PostgreSQL and keeps it
 * until it commits, so numbers are taken in commit order. SQLite has one writer at a time already.
 */
import { perDialect, type Database } from '#server/store/database.ts';

export type ChangeInput = {
  changeId: string;
  deviceId: string;
  entity: string;
  entityKey: string;
  op: string;
  hlc: string;
  userId: string | null;
  /** JSON of the fields the change writes. */
  payload: string;
};

export type ChangeRow = {
  seq: number;
  change_id: string;
  device_id: string;
  entity: string;
  entity_key: string;
  op: string;
  hlc: string;
  user_id: string | null;
  payload: string;
  committed_at: string;
};

/** 'mias' in ASCII: the one lock every appender takes. */
const CHANGE_LOG_LOCK = 0x6d696173;

const TAKE_LOCK = perDialect((d) => (d === 'postgres' ? `SELECT pg_advisory_xact_lock(${CHANGE_LOG_LOCK})` : 'SELECT 1'));

/**
 * Appends changes; `tx` must be the transaction that makes them, which holds the log's lock from
 * here until it ends. Returns each change's number. A change id seen before is not appended
 * again (a push repeated after a lost acknowledgement) and gets no number.
 */
export async function appendChanges(tx: Database, changes: readonly ChangeInput[], at: string): Promise<(number | null)[]> {
  if (changes.length === 0) return [];
  await tx.get(TAKE_LOCK);
  const seqs: (number | null)[] = [];
  for (const c of changes) {
    const row = (await tx.get(`INSERT INTO sync_changes (change_id, device_id, entity, entity_key, op, hlc, user_id, payload, committed_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (change_id) DO NOTHING RETURNING seq`,
      [c.changeId, c.deviceId, c.entity, c.entityKey, c.op, c.hlc, c.userId, c.payload, at])) as { seq: number } | undefined;
    seqs.push(row?.seq ?? null);
  }
  return seqs;
}

/** Changes numbered after `afterSeq`, in order, at most `limit`. */
export async function readChangesAfter(db: Database, afterSeq: number, limit: number): Promise<ChangeRow[]> {
  return (await db.all('SELECT * FROM sync_changes WHERE seq > ? ORDER BY seq LIMIT ?', [afterSeq, limit])) as ChangeRow[];
}
