/**
 * An admin's decision on a quarantined change (docs/sync.md, Quarantine). Releasing applies the
 * change as it was made (its timestamp, its user), past the check that stopped it (the Patient
 * ID held with other demographics, the user disabled before the change), and puts it in the
 * hub's log, so the other workstations get it too. Discarding keeps it out for good. Either way
 * the row stays, with who decided and when; a change is never deleted.
 */
import { z } from 'zod';
import { conflict, notFound } from '#server/errors.ts';
import type { RefCache } from '#server/imports/ingest.ts';
import type { Services } from '#server/services.ts';
import { findQuarantined, resolveQuarantined, type QuarantineRow } from '#server/store/quarantine.ts';
import { appendChanges } from '#server/store/sync-log.ts';
import { applyChange, prepareChanges, type RemoteChange } from '#server/sync/entities.ts';
import { SYNC_ENTITIES } from '#server/sync/replica.ts';

export const quarantined = z.object({
  id: z.string().describe('The change id'),
  device_id: z.string(),
  entity: z.string(),
  key: z.string(),
  reason: z.string(),
  payload: z.unknown(),
  created_at: z.string(),
  resolution: z.enum(['released', 'discarded']).nullable(),
  resolved_by: z.string().nullable(),
  resolved_at: z.string().nullable(),
});
export type Quarantined = z.output<typeof quarantined>;
export const quarantineParams = z.object({ change_id: z.string().min(1).max(64) });
export const quarantineQuery = z.object({ resolved: z.enum(['true', 'false']).optional().describe('true: the ones an admin decided on too') });

export function toQuarantined(q: QuarantineRow): Quarantined {
  return {
    id: q.change_id,
    device_id: q.device_id,
    entity: q.entity,
    key: q.entity_key,
    reason: q.reason,
    payload: JSON.parse(q.payload) as unknown,
    created_at: q.created_at,
    resolution: q.resolution,
    resolved_by: q.resolved_by,
    resolved_at: q.resolved_at,
  };
}

async function undecided(s: Services, changeId: string): Promise<QuarantineRow> {
  const row = await findQuarantined(s.db, changeId);
  if (!row) throw notFound('Quarantined change', changeId);
  if (row.resolution) throw conflict(`This change was ${row.resolution} already`, `by ${row.resolved_by ?? 'an admin'} at ${row.resolved_at ?? ''}`);
  return row;
}

export async function releaseQuarantined(s: Services, changeId: string, adminId: string): Promise<Quarantined> {
  const row = await undecided(s, changeId);
  const entity = SYNC_ENTITIES.find((e) => e === row.entity);
  if (!entity || row.hlc === null) throw conflict('This change cannot be released', 'it was quarantined by a mia that did not keep its timestamp; the workstation can make it again');
  const change: RemoteChange = { change_id: row.change_id, device_id: row.device_id, entity, key: row.entity_key, hlc: row.hlc, user_id: row.user_id, payload: JSON.parse(row.payload) as unknown };
  const prepared = await prepareChanges(s.db, s.dataDir, [change]);
  const at = s.clock.now().toISOString();
  await s.db.transaction(async (tx) => {
    const refs: RefCache = new Map();
    const outcome = await applyChange(tx, change, prepared, refs, at, { admitted: true });
    if (outcome.status !== 'accepted') throw conflict('The change cannot be applied now', outcome.reason);
    await appendChanges(tx, [{ changeId: change.change_id, deviceId: change.device_id, entity: change.entity, entityKey: change.key, op: 'put', hlc: change.hlc, userId: change.user_id, payload: row.payload }], at);
    if (!(await resolveQuarantined(tx, changeId, 'released', adminId, at))) throw conflict('Another admin decided on this change meanwhile', 'reload the list');
  }, { durable: true });
  return toQuarantined((await findQuarantined(s.db, changeId)) ?? row);
}

export async function discardQuarantined(s: Services, changeId: string, adminId: string): Promise<Quarantined> {
  await undecided(s, changeId);
  if (!(await resolveQuarantined(s.db, changeId, 'discarded', adminId, s.clock.now().toISOString()))) throw conflict('Another admin decided on this change meanwhile', 'reload the list');
  const row = await findQuarantined(s.db, changeId);
  if (!row) throw notFound('Quarantined change', changeId);
  return toQuarantined(row);
}
