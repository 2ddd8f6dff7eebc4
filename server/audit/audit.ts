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
  return listAuditEvents(db, filter, page);
}
