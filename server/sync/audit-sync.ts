/**
 * Audit trails go up only (docs/sync.md, Audit): a workstation sends the events it recorded, each
 * under its own number there (its audit event id, which only ever grows and is never re-used),
 * and the hub keeps them under (device, number). The hub knows which number it expects next
 * from each device, so a number that never arrives is a gap it records and shows, instead of a
 * silence nobody notices. Sending again what was sent is harmless: a number seen is skipped.
 *
 * A counted row (refusals within one minute, server/audit/audit.ts) still grows while its minute
 * is open, so a workstation sends its events up to the first such row whose minute has not
 * ended, and the rest at a later round. Until an event has reached the hub, the workstation's
 * retention does not archive it away (server/audit/retention.ts).
 */
import { z } from 'zod';
import type { Database } from '#server/store/database.ts';
import { insertDeviceAuditEvents, readOwnAuditAfter, type DeviceAuditEvent } from '#server/store/audit.ts';
import { insertAuditGap, setAuditNextSeq, type DeviceRow } from '#server/store/devices.ts';
import { getSetting, setSetting } from '#server/store/settings.ts';

export const MAX_AUDIT_PUSH = 1000;
/** The number of the newest own event the hub has taken: a workstation setting. */
export const AUDIT_PUSHED = 'sync.audit_pushed';
/** A counted row takes refusals until its minute ends, and a moment more for writes in flight. */
const COUNT_SETTLE_MS = 10_000;
const countStillOpen = (at: string, now: Date): boolean => {
  const minuteStart = Date.parse(`${at.slice(0, 16)}:00.000Z`);
  return Number.isNaN(minuteStart) || now.getTime() < minuteStart + 60_000 + COUNT_SETTLE_MS;
};

const text = (max: number) => z.string().max(max).nullable();
export const auditEvent = z.object({
  seq: z.number().int().min(1),
  at: z.string().max(40),
  request_id: text(100),
  key_id: text(100),
  user_id: text(100),
  action: z.string().min(1).max(100),
  target: text(500),
  patient_id: text(200),
  patient_ids: z.array(z.string().max(200)).max(10_000).nullable(),
  outcome: z.string().min(1).max(40),
  status_code: z.number().int().min(0).max(999).nullable(),
  address: text(100),
  count: z.number().int().min(1),
});
export const auditPushBody = z.object({
  after: z.number().int().min(0).describe('The newest event number this device has had taken by the hub before this batch'),
  events: z.array(auditEvent).min(1).max(MAX_AUDIT_PUSH),
}).strict();
export const auditPushResponse = z.object({
  stored: z.number().int(),
  duplicates: z.number().int(),
  gaps: z.array(z.object({ from: z.number().int(), to: z.number().int() })),
  next_seq: z.number().int(),
});
export type AuditPush = z.output<typeof auditPushBody>;
export type AuditPushResponse = z.output<typeof auditPushResponse>;

/** The hub's side, in the caller's transaction. */
export async function receiveAudit(tx: Database, device: DeviceRow, body: AuditPush, at: string): Promise<AuditPushResponse> {
  const events = [...body.events].sort((a, b) => a.seq - b.seq);
  let expected = device.audit_next_seq ?? body.after + 1;
  const gaps: { from: number; to: number }[] = [];
  // The device says it had more taken than this hub holds (the hub restored from a backup).
  if (body.after + 1 > expected) gaps.push({ from: expected, to: body.after });
  expected = Math.max(expected, body.after + 1);
  const fresh: DeviceAuditEvent[] = [];
  let duplicates = 0;
  for (const e of events) {
    if (e.seq < expected) {
      duplicates += 1;
      continue;
    }
    if (e.seq > expected) gaps.push({ from: expected, to: e.seq - 1 });
    fresh.push({ ...e, patient_ids: e.patient_ids && e.patient_ids.length > 0 ? JSON.stringify(e.patient_ids) : null });
    expected = e.seq + 1;
  }
  const stored = await insertDeviceAuditEvents(tx, device.device_id, fresh);
  for (const g of gaps) await insertAuditGap(tx, device.id, g.from, g.to, at);
  await setAuditNextSeq(tx, device.id, expected);
  return { stored, duplicates: duplicates + (fresh.length - stored), gaps, next_seq: expected };
}

/** The workstation's next batch: its events after the last taken, up to an open counted row. */
export async function nextAuditBatch(db: Database, now: Date): Promise<AuditPush | null> {
  const after = Number((await getSetting(db, AUDIT_PUSHED)) ?? '0');
  const rows = await readOwnAuditAfter(db, after, MAX_AUDIT_PUSH);
  const cut = rows.findIndex((r) => r.counted === 1 && countStillOpen(r.at, now));
  const ready = cut === -1 ? rows : rows.slice(0, cut);
  if (ready.length === 0) return null;
  return {
    after,
    events: ready.map((r) => ({
      seq: r.id,
      at: r.at,
      request_id: r.request_id,
      key_id: r.key_id,
      user_id: r.user_id,
      action: r.action,
      target: r.target,
      patient_id: r.patient_id,
      patient_ids: r.patient_ids === null ? null : (JSON.parse(r.patient_ids) as string[]),
      outcome: r.outcome,
      status_code: r.status_code,
      address: r.address,
      count: r.count,
    })),
  };
}

export async function markAuditPushed(db: Database, seq: number): Promise<void> {
  await setSetting(db, AUDIT_PUSHED, String(seq));
}

/** The newest own event retention may archive: all when not linked, else what the hub has. */
export async function auditArchivableUpTo(db: Database, linked: boolean): Promise<number> {
  if (!linked) return Number.MAX_SAFE_INTEGER;
  return Number((await getSetting(db, AUDIT_PUSHED)) ?? '0');
}
