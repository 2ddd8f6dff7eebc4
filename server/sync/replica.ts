/**
 * This copy of mia's data as a party to sync (docs/sync.md): its device id, its hybrid logical
 * clock, and the one way a syncable write records its change - in the write's own transaction,
 * so a change that never committed never leaves and a committed one always does.
 *
 * Every process that opens a data folder has the same device id (a CLI import beside the server,
 * a hub's nodes); each keeps its own clock, started after the newest timestamp the folder holds,
 * so timestamps keep rising across restarts. Two processes can tick the same timestamp: ties are
 * broken by the change id wherever timestamps are compared.
 */
import type { Clock } from '#server/clock.ts';
import type { Database } from '#server/store/database.ts';
import { ensureSetting } from '#server/store/settings.ts';
import { appendChanges, readNewestOwnHlc } from '#server/store/sync-log.ts';
import { createHlc, formatHlc, parseHlc, type Hlc } from '#server/sync/hlc.ts';
import { uuid7 } from '#server/sync/uuid7.ts';

export type Replica = {
  /** UUIDv7, made the first time the folder was opened; names this replica's changes. */
  readonly deviceId: string;
  readonly hlc: Hlc;
  readonly clock: Clock;
};

/** What a syncable write says about itself. */
export type LocalChange = {
  entity: SyncEntity;
  /** The row's name everywhere: a DICOM UID, a public id. */
  key: string;
  op: 'put';
  /** The acting user's public id; null for the system (an import from a watched folder). */
  userId: string | null;
  payload: unknown;
  /** A timestamp the write already took from this replica's clock (a verdict event keeps it). */
  hlc?: string;
  /** An id the write already gave the change (a finalization names the change that signed it). */
  changeId?: string;
};

/** What syncs (docs/sync.md, What syncs). */
export const SYNC_ENTITIES = ['instance', 'analysis', 'review', 'report', 'addendum', 'finding', 'scan'] as const;
export type SyncEntity = (typeof SYNC_ENTITIES)[number];

const DEVICE_SETTING = 'sync.device_id';

export async function openReplica(db: Database, clock: Clock): Promise<Replica> {
  const deviceId = await ensureSetting(db, DEVICE_SETTING, uuid7(clock.now().getTime()));
  const newest = await readNewestOwnHlc(db, deviceId);
  const parsed = newest === undefined ? undefined : parseHlc(newest);
  const hlc = createHlc(deviceId, () => clock.now().getTime(), parsed ? { wall: parsed.wall, counter: parsed.counter } : undefined);
  return { deviceId, hlc, clock };
}

/** Appends the changes of a local write; `tx` must be the write's transaction. */
export async function recordChanges(tx: Database, replica: Replica, changes: readonly LocalChange[]): Promise<void> {
  if (changes.length === 0) return;
  const at = replica.clock.now();
  await appendChanges(
    tx,
    changes.map((c) => ({
      changeId: c.changeId ?? uuid7(at.getTime()),
      deviceId: replica.deviceId,
      entity: c.entity,
      entityKey: c.key,
      op: c.op,
      hlc: c.hlc ?? formatHlc(replica.hlc.tick()),
      userId: c.userId,
      payload: JSON.stringify(c.payload),
    })),
    at.toISOString(),
  );
}
