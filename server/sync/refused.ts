/**
 * A workstation's own changes the hub refused for good (docs/sync.md, Transport): listed with the
 * hub's reason for an admin, and sent again once the cause is mended (a damaged file restored
 * from a backup, a hub upgraded to take what it refused). A refused change is never deleted.
 */
import { z } from 'zod';
import { notFound } from '#server/errors.ts';
import type { Services } from '#server/services.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import { listRefusedOwnChanges, resendRefusedOwnChanges, type ChangeRow } from '#server/store/sync-log.ts';

export const refusedChange = z.object({
  id: z.string().describe('The change id'),
  entity: z.string(),
  key: z.string(),
  reason: z.string().describe('Why the hub (or this workstation, for a damaged file) refused it'),
  made_at: z.string().describe('When the change was made here'),
});
export type RefusedChange = z.output<typeof refusedChange>;
export const refusedParams = z.object({ change_id: z.string().min(1).max(64) });

type Deps = Pick<Services, 'db' | 'replica'>;

function toRefused(row: ChangeRow): RefusedChange {
  return { id: row.change_id, entity: row.entity, key: row.entity_key, reason: row.push_error ?? 'refused by the hub', made_at: row.committed_at };
}

export async function listRefused(s: Deps, page: PageRequest): Promise<Page<RefusedChange>> {
  const rows = await listRefusedOwnChanges(s.db, s.replica.deviceId, page);
  return { items: rows.items.map(toRefused), nextAfterId: rows.nextAfterId };
}

/** Makes refused changes pending again (`changeId`, or all of them); the next round sends them. */
export async function sendRefusedAgain(s: Deps, changeId: string | null): Promise<number> {
  const count = await resendRefusedOwnChanges(s.db, s.replica.deviceId, changeId);
  if (changeId !== null && count === 0) throw notFound('Refused change', changeId);
  return count;
}
