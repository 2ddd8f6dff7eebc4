/**
 * The hub's side of a pull (GET /v1/sync/pull, docs/sync.md): the changes after the device's
 * cursor that other devices (and the hub's own readers) made, in the order they committed. The
 * cursor a device sends is what it has applied, so it is also the device's acknowledged lag.
 */
import type { Services } from '#server/services.ts';
import { recordDevicePull } from '#server/store/devices.ts';
import { readChangesForPull } from '#server/store/sync-log.ts';
import { decodeCursor, encodeCursor } from '#server/sync/cursor.ts';
import type { Pusher } from '#server/sync/push.ts';
import type { SyncEntity } from '#server/sync/replica.ts';
// Types only: the schemas module imports this one's limits.
import type { PullResponse } from '#server/api/sync-schemas.ts';

export const MAX_PULL = 1000;

export async function servePull(s: Services, device: Pusher, cursor: string | undefined, limit: number): Promise<PullResponse> {
  const after = decodeCursor(cursor);
  const { rows, head } = await readChangesForPull(s.db, device.id, after, limit);
  if (after > 0) {
    try {
      await recordDevicePull(s.db, device.ref, after);
    } catch {
      // The devices screen's lag; the pull itself goes on.
    }
  }
  const full = rows.length === limit;
  const next = full ? rows[rows.length - 1]!.seq : Math.max(after, head);
  return {
    changes: rows.map((r) => ({
      change_id: r.change_id,
      device_id: r.device_id,
      entity: r.entity as SyncEntity,
      key: r.entity_key,
      op: 'put',
      hlc: r.hlc,
      user_id: r.user_id,
      payload: JSON.parse(r.payload) as unknown,
    })),
    cursor: encodeCursor(next),
    has_more: full,
    hub_time: s.clock.now().toISOString(),
  };
}
