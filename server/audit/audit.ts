/**
 * The audit trail: who read, changed or exported what, and every failed authentication
 * (PRODUCT.md, Security baseline). Entries carry ids, never keys, names or report text.
 */
import type { z } from 'zod';
import type { auditEvent } from '#server/api/schemas.ts';
import type { Database } from '#server/store/database.ts';
import type { AuditFilter, AuditInput } from '#server/store/audit.ts';
import { insertAuditEvent, listAuditEvents } from '#server/store/audit.ts';
import type { Page, PageRequest } from '#server/store/page.ts';

export type AuditEvent = z.infer<typeof auditEvent>;

export function recordAudit(db: Database, event: AuditInput): void {
  insertAuditEvent(db, event);
}

export function listAudit(db: Database, filter: AuditFilter, page: PageRequest): Page<AuditEvent> {
  const rows = listAuditEvents(db, filter, page);
  return {
    items: rows.items.map(({ patient_ids, ...row }) => ({ ...row, patient_ids: patient_ids ? (JSON.parse(patient_ids) as string[]) : [] })),
    nextAfterId: rows.nextAfterId,
  };
}

/** Distinct patient ids of returned items, in order of first appearance. */
export function patientsOf(items: readonly unknown[]): string[] {
  const seen = new Set<string>();
  for (const item of items) {
    if (typeof item === 'object' && item !== null && 'patient_id' in item && typeof item.patient_id === 'string') seen.add(item.patient_id);
  }
  return [...seen];
}
