/**
 * Enrolling, listing and revoking the workstations that sync with a hub (docs/sync.md, Devices).
 * A device gets a UUIDv7 id and a key in the usual format whose digest alone is kept; revoking
 * refuses its key at once on every node, since every request looks the device up.
 */
import type { Clock } from '#server/clock.ts';
import { digestKey, displayPrefix, generateKey } from '#server/auth/key-format.ts';
import { invalid, notFound } from '#server/errors.ts';
import type { Database } from '#server/store/database.ts';
import { countAuditGapEvents, findDeviceById, insertDevice, listDevices, revokeDevice, type DeviceRow } from '#server/store/devices.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import { newPublicId } from '#server/store/public-id.ts';
import { countChangesToPull } from '#server/store/sync-log.ts';
import { mapInOrder } from '#server/in-order.ts';
import { uuid7 } from '#server/sync/uuid7.ts';

export type DeviceDeps = { db: Database; clock: Clock };

export type DeviceView = {
  id: string;
  name: string;
  key_id: string;
  key_prefix: string;
  status: 'active' | 'revoked';
  enrolled_by: string;
  created_at: string;
  last_seen_at: string | null;
  /** Changes on the hub the device has not pulled yet. */
  lag: number;
  /** Its clock against the hub's at its last push, ms (positive: ahead). */
  clock_offset_ms: number | null;
  revoked_at: string | null;
  /** Audit event numbers of this device that never reached the hub. */
  audit_gap_events: number;
};

const NAME = /^[\p{L}\p{N} ._-]{1,64}$/u;

export function toDeviceView(row: DeviceRow, lag: number, auditGapEvents = 0): DeviceView {
  return {
    id: row.device_id,
    name: row.name,
    key_id: row.key_public_id,
    key_prefix: row.key_prefix,
    status: row.revoked_at ? 'revoked' : 'active',
    enrolled_by: row.enrolled_by,
    created_at: row.created_at,
    last_seen_at: row.last_seen_at,
    lag,
    clock_offset_ms: row.clock_offset_ms,
    revoked_at: row.revoked_at,
    audit_gap_events: auditGapEvents,
  };
}

/** A new device and its key; the key is returned once and never stored. */
export async function enrollDevice(deps: DeviceDeps, name: string, enrolledBy: string): Promise<{ device: DeviceView; key: string }> {
  const trimmed = name.trim();
  if (!NAME.test(trimmed)) throw invalid('Invalid device name', 'name: 1-64 letters, digits, spaces, dots, dashes or underscores');
  const key = generateKey();
  const now = deps.clock.now();
  const row = await insertDevice(deps.db, {
    deviceId: uuid7(now.getTime()),
    name: trimmed,
    keyPublicId: newPublicId('dkey'),
    keyDigest: digestKey(key),
    keyPrefix: displayPrefix(key),
    enrolledBy,
    at: now.toISOString(),
  });
  return { device: toDeviceView(row, await countChangesToPull(deps.db, row.device_id, 0)), key };
}

export async function listDeviceViews(deps: DeviceDeps, page: PageRequest): Promise<Page<DeviceView>> {
  const rows = await listDevices(deps.db, page);
  const items = await mapInOrder(rows.items, async (row) => toDeviceView(row, await countChangesToPull(deps.db, row.device_id, row.pulled_seq), await countAuditGapEvents(deps.db, row.id)));
  return { items, nextAfterId: rows.nextAfterId };
}

export async function revokeDeviceById(deps: DeviceDeps, deviceId: string): Promise<DeviceView> {
  const row = await findDeviceById(deps.db, deviceId);
  if (!row) throw notFound('Device', deviceId);
  await revokeDevice(deps.db, row.id, deps.clock.now().toISOString());
  const after = (await findDeviceById(deps.db, deviceId)) ?? row;
  return toDeviceView(after, await countChangesToPull(deps.db, after.device_id, after.pulled_seq), await countAuditGapEvents(deps.db, after.id));
}
