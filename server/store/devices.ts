/** SQL for enrolled sync devices (docs/sync.md, Devices). Keys are kept as digests only. */
import type { Database } from '#server/store/database.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type DeviceRow = {
  id: number;
  device_id: string;
  name: string;
  key_public_id: string;
  key_digest: string;
  key_prefix: string;
  enrolled_by: string;
  created_at: string;
  last_seen_at: string | null;
  pulled_seq: number;
  clock_offset_ms: number | null;
  revoked_at: string | null;
  /** The audit event number the hub expects next from this device (migration 21). */
  audit_next_seq: number | null;
};

export async function insertDevice(
  db: Database,
  input: { deviceId: string; name: string; keyPublicId: string; keyDigest: string; keyPrefix: string; enrolledBy: string; at: string },
): Promise<DeviceRow> {
  return (await db.get(`INSERT INTO devices (device_id, name, key_public_id, key_digest, key_prefix, enrolled_by, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *`,
    [input.deviceId, input.name, input.keyPublicId, input.keyDigest, input.keyPrefix, input.enrolledBy, input.at])) as DeviceRow;
}

export async function findDeviceByDigest(db: Database, digest: string): Promise<DeviceRow | undefined> {
  return (await db.get('SELECT * FROM devices WHERE key_digest = ?', [digest])) as DeviceRow | undefined;
}

export async function findDeviceById(db: Database, deviceId: string): Promise<DeviceRow | undefined> {
  return (await db.get('SELECT * FROM devices WHERE device_id = ?', [deviceId])) as DeviceRow | undefined;
}

export async function listDevices(db: Database, page: PageRequest): Promise<Page<DeviceRow>> {
  return toPage((await db.all('SELECT * FROM devices WHERE id > ? ORDER BY id LIMIT ?', [page.afterId, page.limit + 1])) as DeviceRow[], page.limit);
}

export async function revokeDevice(db: Database, ref: number, at: string): Promise<void> {
  await db.run('UPDATE devices SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?', [at, ref]);
}

/** At most once a minute per device, like a key's last use: reads stay read-only. */
export async function touchDevice(db: Database, ref: number, at: string): Promise<void> {
  await db.run('UPDATE devices SET last_seen_at = ? WHERE id = ?', [at, ref]);
}

export async function recordDevicePull(db: Database, ref: number, seq: number): Promise<void> {
  await db.run('UPDATE devices SET pulled_seq = ? WHERE id = ? AND pulled_seq < ?', [seq, ref, seq]);
}

export async function recordDeviceClock(db: Database, ref: number, offsetMs: number): Promise<void> {
  await db.run('UPDATE devices SET clock_offset_ms = ? WHERE id = ?', [offsetMs, ref]);
}

export type Receipt = { request_sha256: string; response: string };

export async function findReceipt(db: Database, deviceRef: number, key: string): Promise<Receipt | undefined> {
  return (await db.get('SELECT request_sha256, response FROM sync_receipts WHERE device_ref = ? AND idempotency_key = ?', [deviceRef, key])) as Receipt | undefined;
}

export async function insertReceipt(db: Database, deviceRef: number, key: string, requestSha256: string, response: string, at: string): Promise<void> {
  await db.run(`INSERT INTO sync_receipts (device_ref, idempotency_key, request_sha256, response, created_at) VALUES (?, ?, ?, ?, ?)
     ON CONFLICT (device_ref, idempotency_key) DO NOTHING`, [deviceRef, key, requestSha256, response, at]);
}

export async function setAuditNextSeq(db: Database, ref: number, next: number): Promise<void> {
  await db.run('UPDATE devices SET audit_next_seq = ? WHERE id = ?', [next, ref]);
}

export async function insertAuditGap(db: Database, ref: number, fromSeq: number, toSeq: number, at: string): Promise<void> {
  await db.run('INSERT INTO audit_gaps (device_ref, from_seq, to_seq, found_at) VALUES (?, ?, ?, ?)', [ref, fromSeq, toSeq, at]);
}

/** How many of a device's audit event numbers never reached the hub. */
export async function countAuditGapEvents(db: Database, ref: number): Promise<number> {
  const row = (await db.get('SELECT COALESCE(SUM(to_seq - from_seq + 1), 0) AS n FROM audit_gaps WHERE device_ref = ?', [ref])) as { n: number | string };
  return Number(row.n);
}
