/** SQL for sync's quarantine (migration 18): changes the hub keeps for an admin instead of merging. */
import type { Database } from '#server/store/database.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type QuarantineRow = {
  id: number;
  change_id: string;
  device_id: string;
  entity: string;
  entity_key: string;
  reason: string;
  payload: string;
  created_at: string;
  /** The change's timestamp and user, for releasing it as it was made (migration 23). */
  hlc: string | null;
  user_id: string | null;
  resolution: 'released' | 'discarded' | null;
  resolved_by: string | null;
  resolved_at: string | null;
};

export async function quarantineChange(db: Database, row: Omit<QuarantineRow, 'id' | 'resolution' | 'resolved_by' | 'resolved_at'>): Promise<void> {
  await db.run(`INSERT INTO sync_quarantine (change_id, device_id, entity, entity_key, reason, payload, created_at, hlc, user_id)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (change_id) DO NOTHING`, [row.change_id, row.device_id, row.entity, row.entity_key, row.reason, row.payload, row.created_at, row.hlc, row.user_id]);
}

/** Quarantined changes; those an admin decided on only when asked for. */
export async function listQuarantine(db: Database, page: PageRequest, includeResolved = false): Promise<Page<QuarantineRow>> {
  return toPage((await db.all(`SELECT * FROM sync_quarantine WHERE id > ? AND (? = 1 OR resolution IS NULL) ORDER BY id LIMIT ?`, [page.afterId, includeResolved ? 1 : 0, page.limit + 1])) as QuarantineRow[], page.limit);
}

export async function findQuarantined(db: Database, changeId: string): Promise<QuarantineRow | undefined> {
  return (await db.get('SELECT * FROM sync_quarantine WHERE change_id = ?', [changeId])) as QuarantineRow | undefined;
}

/** Records an admin's decision; false when another decision came first. */
export async function resolveQuarantined(db: Database, changeId: string, resolution: 'released' | 'discarded', by: string, at: string): Promise<boolean> {
  return (await db.run('UPDATE sync_quarantine SET resolution = ?, resolved_by = ?, resolved_at = ? WHERE change_id = ? AND resolution IS NULL', [resolution, by, at, changeId])) === 1;
}

export type StoredPatient = { name: string | null; birth_date: string | null; sex: string | null };

export async function findPatientDemographics(db: Database, patientId: string): Promise<StoredPatient | undefined> {
  return (await db.get('SELECT name, birth_date, sex FROM patients WHERE patient_id = ?', [patientId])) as StoredPatient | undefined;
}
