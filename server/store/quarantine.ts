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
};

export async function quarantineChange(db: Database, row: Omit<QuarantineRow, 'id'>): Promise<void> {
  await db.run(`INSERT INTO sync_quarantine (change_id, device_id, entity, entity_key, reason, payload, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (change_id) DO NOTHING`, [row.change_id, row.device_id, row.entity, row.entity_key, row.reason, row.payload, row.created_at]);
}

export async function listQuarantine(db: Database, page: PageRequest): Promise<Page<QuarantineRow>> {
  return toPage((await db.all('SELECT * FROM sync_quarantine WHERE id > ? ORDER BY id LIMIT ?', [page.afterId, page.limit + 1])) as QuarantineRow[], page.limit);
}

export type StoredPatient = { name: string | null; birth_date: string | null; sex: string | null };

export async function findPatientDemographics(db: Database, patientId: string): Promise<StoredPatient | undefined> {
  return (await db.get('SELECT name, birth_date, sex FROM patients WHERE patient_id = ?', [patientId])) as StoredPatient | undefined;
}
