/**
 * SQL for the hub's change log (docs/sync.md): appended in the transaction that makes the change,
 * read by workstations in `seq` order.
 *
 * A sequence alone would let a reader skip a change: two transactions take 9 and 10, 10 commits
 * first, a reader moves past it, 9 commits later and is never read. Every transaction that
 * appends therefore first takes one transaction-scoped advisory lock on PostgreSQL and keeps it
 * until it commits, so numbers are taken in commit order. SQLite has one writer at a time already.
 */
import { jsonElements, perDialect, type Database } from '#server/store/database.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

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
  /** On a workstation, the hub's answer to its own change (migration 16). */
  push_state: 'accepted' | 'rejected' | null;
  push_error: string | null;
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

/** The newest timestamp this device gave a change of its own: where its clock starts again. */
export async function readNewestOwnHlc(db: Database, deviceId: string): Promise<string | undefined> {
  const row = (await db.get('SELECT MAX(hlc) AS hlc FROM sync_changes WHERE device_id = ?', [deviceId])) as { hlc: string | null } | undefined;
  return row?.hlc ?? undefined;
}

/** A workstation's own changes the hub has not taken yet, oldest first. */
export async function readPendingOwnChanges(db: Database, deviceId: string, limit: number): Promise<ChangeRow[]> {
  return (await db.all('SELECT * FROM sync_changes WHERE device_id = ? AND push_state IS NULL ORDER BY seq LIMIT ?', [deviceId, limit])) as ChangeRow[];
}

export async function countPendingOwnChanges(db: Database, deviceId: string): Promise<{ pending: number; rejected: number }> {
  const pending = (await db.get('SELECT COUNT(*) AS n FROM sync_changes WHERE device_id = ? AND push_state IS NULL', [deviceId])) as { n: number | string };
  const rejected = (await db.get("SELECT COUNT(*) AS n FROM sync_changes WHERE device_id = ? AND push_state = 'rejected'", [deviceId])) as { n: number | string };
  return { pending: Number(pending.n), rejected: Number(rejected.n) };
}

/** The hub's answer to one pushed change: accepted, or refused for good (the reason is kept). */
export async function markPushed(db: Database, changeId: string, state: 'accepted' | 'rejected', error: string | null): Promise<void> {
  await db.run('UPDATE sync_changes SET push_state = ?, push_error = ? WHERE change_id = ?', [state, error, changeId]);
}

/** A page of a workstation's own changes the hub refused for good, oldest first; `id` is `seq`. */
export async function listRefusedOwnChanges(db: Database, deviceId: string, page: PageRequest): Promise<Page<ChangeRow & { id: number }>> {
  const rows = (await db.all("SELECT seq AS id, sync_changes.* FROM sync_changes WHERE device_id = ? AND push_state = 'rejected' AND seq > ? ORDER BY seq LIMIT ?", [deviceId, page.afterId, page.limit + 1])) as (ChangeRow & { id: number })[];
  return toPage(rows, page.limit);
}

/** Refused changes of this workstation made pending again, the named one or all; how many. */
export async function resendRefusedOwnChanges(db: Database, deviceId: string, changeId: string | null): Promise<number> {
  const again = "UPDATE sync_changes SET push_state = NULL, push_error = NULL WHERE device_id = ? AND push_state = 'rejected'";
  return changeId === null ? await db.run(again, [deviceId]) : await db.run(`${again} AND change_id = ?`, [deviceId, changeId]);
}

/**
 * A page of the log for a device's pull: the changes after `afterSeq` that other devices made,
 * and the log's head in the same snapshot, so a page shorter than `limit` moves the cursor to the
 * head (the device's own changes between are not sent back to it).
 */
export async function readChangesForPull(db: Database, deviceId: string, afterSeq: number, limit: number): Promise<{ rows: ChangeRow[]; head: number }> {
  // One statement, so the page and the head come from one snapshot; the outer join keeps the
  // head when the page is empty.
  const rows = (await db.all(`SELECT (SELECT COALESCE(MAX(seq), 0) FROM sync_changes) AS head, c.*
     FROM (SELECT 1 AS one) o
     LEFT JOIN (SELECT * FROM sync_changes WHERE seq > ? AND device_id <> ? ORDER BY seq LIMIT ?) c ON o.one = 1
     ORDER BY c.seq`, [afterSeq, deviceId, limit])) as (ChangeRow & { head: number | string; seq: number | null })[];
  const head = Number(rows[0]?.head ?? afterSeq);
  return { rows: rows.filter((r) => r.seq !== null).map(({ head: _head, ...row }) => row as ChangeRow), head };
}

/** Whether a change is in this log already (pulled earlier, or made here). */
export async function hasChange(db: Database, changeId: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS one FROM sync_changes WHERE change_id = ?', [changeId])) !== undefined;
}

/** Why the hub asked to send a change later (it stays pending); shown with the sync status. */
export async function notePushDeferred(db: Database, changeId: string, reason: string): Promise<void> {
  await db.run('UPDATE sync_changes SET push_error = ? WHERE change_id = ? AND push_state IS NULL', [reason.slice(0, 500), changeId]);
}

/** The newest reason a pending change of this device was deferred, if any. */
export async function readNewestDeferral(db: Database, deviceId: string): Promise<string | undefined> {
  const row = (await db.get('SELECT push_error FROM sync_changes WHERE device_id = ? AND push_state IS NULL AND push_error IS NOT NULL ORDER BY seq DESC LIMIT 1', [deviceId])) as { push_error: string } | undefined;
  return row?.push_error;
}

/** Changes after `afterSeq` that a device would pull (others' changes): its lag. */
export async function countChangesToPull(db: Database, deviceId: string, afterSeq: number): Promise<number> {
  const row = (await db.get('SELECT COUNT(*) AS n FROM sync_changes WHERE seq > ? AND device_id <> ?', [afterSeq, deviceId])) as { n: number | string };
  return Number(row.n);
}

/**
 * A local user became the hub's user of the same email (server/sync/directory.ts): the changes
 * they made here that have not been taken by the hub name them by the hub's id from now on.
 */
export async function relabelPendingUser(db: Database, deviceId: string, from: string, to: string): Promise<void> {
  await db.run("UPDATE sync_changes SET user_id = ? WHERE device_id = ? AND user_id = ? AND push_state IS NULL", [to, deviceId, from]);
  await db.run('UPDATE review_events SET user_id = ? WHERE user_id = ?', [to, from]);
}

export type InboxRow = { change_id: string; device_id: string; entity: string; entity_key: string; op: string; hlc: string; user_id: string | null; payload: string; reason: string };

/**
 * A pulled change that names what is not here yet: kept to be tried again (migration 20), when
 * `waitsFor` arrives (migration 34; null: every round). A row still waiting for the same is not
 * written again.
 */
export async function keepInInbox(db: Database, c: Omit<InboxRow, 'reason'>, reason: string, waitsFor: string | null, at: string): Promise<void> {
  await db.run(
    `INSERT INTO sync_inbox (change_id, device_id, entity, entity_key, op, hlc, user_id, payload, reason, waits_for, received_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
     ON CONFLICT (change_id) DO UPDATE SET reason = excluded.reason, waits_for = excluded.waits_for
      WHERE sync_inbox.reason IS DISTINCT FROM excluded.reason OR sync_inbox.waits_for IS DISTINCT FROM excluded.waits_for`,
    [c.change_id, c.device_id, c.entity, c.entity_key, c.op, c.hlc, c.user_id, c.payload, reason.slice(0, 500), waitsFor, at],
  );
}

const INBOX_COLUMNS = 'id, change_id, device_id, entity, entity_key, op, hlc, user_id, payload, reason';

/** The inbox in the order its changes arrived (which is the hub's order). */
export async function readInbox(db: Database, afterId: number, limit: number): Promise<(InboxRow & { id: number })[]> {
  return (await db.all(`SELECT ${INBOX_COLUMNS} FROM sync_inbox WHERE id > ? ORDER BY id LIMIT ?`, [afterId, limit])) as (InboxRow & { id: number })[];
}

const WAITING_FOR = perDialect((d) => `SELECT ${INBOX_COLUMNS} FROM sync_inbox WHERE waits_for IN (SELECT value FROM ${jsonElements(d, '?')}) ORDER BY id`);

/** The changes waiting for any of `keys` (each looked up in the waits_for index), in arrival order. */
export async function readInboxWaitingFor(db: Database, keys: readonly string[]): Promise<(InboxRow & { id: number })[]> {
  if (keys.length === 0) return [];
  return (await db.all(WAITING_FOR, [JSON.stringify(keys)])) as (InboxRow & { id: number })[];
}

/** The changes waiting for nothing named (a user not known here yet, rows kept before migration 34), a page of them. */
export async function readInboxUnkeyed(db: Database, afterId: number, limit: number): Promise<(InboxRow & { id: number })[]> {
  return (await db.all(`SELECT ${INBOX_COLUMNS} FROM sync_inbox WHERE waits_for IS NULL AND id > ? ORDER BY id LIMIT ?`, [afterId, limit])) as (InboxRow & { id: number })[];
}

export async function dropFromInbox(db: Database, changeId: string): Promise<void> {
  await db.run('DELETE FROM sync_inbox WHERE change_id = ?', [changeId]);
}

export async function countInbox(db: Database): Promise<number> {
  return Number(((await db.get('SELECT COUNT(*) AS n FROM sync_inbox')) as { n: number | string }).n);
}

/** The newest change number a device would pull (made by another device): what live sync watches. */
export async function readNewestForDevice(db: Database, deviceId: string): Promise<number> {
  const row = (await db.get('SELECT COALESCE(MAX(seq), 0) AS head FROM sync_changes WHERE device_id <> ?', [deviceId])) as { head: number | string };
  return Number(row.head);
}
