/**
 * The audit trail: who read, changed or exported what, and every refused or throttled request
 * (PRODUCT.md, Security baseline). Entries carry ids, never keys, names or report text.
 * Events older than the retention age live in archive files (retention.ts); a listing reads
 * them wherever its range or its pages reach, so the trail reads as one.
 */
import { join } from 'node:path';
import { z } from 'zod';
import type { auditEvent } from '#server/api/schemas.ts';
import { AUDIT_ARCHIVE_DIR, readAuditArchive } from '#server/audit/archive.ts';
import type { Database } from '#server/store/database.ts';
import type { AuditFilter, AuditInput, AuditRow } from '#server/store/audit.ts';
import { auditArchivesFor, countAuditEvent, cursorId, findAuditEvents, insertAuditEvent } from '#server/store/audit.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type AuditEvent = z.infer<typeof auditEvent>;

export async function recordAudit(db: Database, event: AuditInput): Promise<void> {
  await insertAuditEvent(db, event);
}

/**
 * A refused or throttled request: anyone who can reach the port can send thousands a second,
 * so they are counted, one row per address, action, outcome, route, key and minute (issue 10).
 * The first of a minute is a row at once; the rest add to its count.
 */
export async function recordRefusal(db: Database, event: AuditInput): Promise<void> {
  const minute = event.at.slice(0, 16);
  await countAuditEvent(db, event, JSON.stringify([minute, event.address ?? null, event.action, event.outcome, event.status_code, event.target, event.key_id]));
}

const patientIdList = z.array(z.string());

function patientIdsOf(row: AuditRow): string[] {
  return row.patient_ids ? patientIdList.parse(JSON.parse(row.patient_ids)) : [];
}

function toEvent(row: AuditRow): AuditEvent {
  return { ...row, patient_ids: patientIdsOf(row) };
}

/** The filter of findAuditEvents's SQL, for archived events: the same comparisons (binary text). */
function matches(row: AuditRow, filter: AuditFilter): boolean {
  if (filter.action !== undefined && row.action !== filter.action) return false;
  if (filter.userId !== undefined && row.user_id !== filter.userId) return false;
  if (filter.patientId !== undefined && row.patient_id !== filter.patientId && !patientIdsOf(row).includes(filter.patientId)) return false;
  if (filter.since !== undefined && row.at < filter.since) return false;
  if (filter.until !== undefined && row.at >= filter.until) return false;
  return true;
}

export async function listAudit(deps: { db: Database; dataDir: string }, filter: AuditFilter, page: PageRequest): Promise<Page<AuditEvent>> {
  const wanted = page.limit + 1;
  const after = cursorId(filter, page);
  const pastCursor = (id: number): boolean => (filter.newestFirst ? id < after : id > after);
  const inPageOrder = (a: AuditRow, b: AuditRow): number => (filter.newestFirst ? b.id - a.id : a.id - b.id);
  let rows = await findAuditEvents(deps.db, filter, page);
  // Archives come in page order of their nearest id; ids of archived and live events may
  // interleave (a clock set back), so each archive that can reach the page is merged in.
  for (const archive of await auditArchivesFor(deps.db, filter, page)) {
    const edge = rows.length >= wanted ? rows[wanted - 1] : undefined;
    if (edge && (filter.newestFirst ? archive.last_id < edge.id : archive.first_id > edge.id)) break;
    const found = readAuditArchive(join(deps.dataDir, AUDIT_ARCHIVE_DIR), archive).filter((row) => pastCursor(row.id) && matches(row, filter));
    rows = [...rows, ...found].sort(inPageOrder).slice(0, wanted);
  }
  const result = toPage(rows, page.limit);
  return { items: result.items.map(toEvent), nextAfterId: result.nextAfterId };
}

/** Distinct patient ids of returned items, in order of first appearance. */
export function patientsOf(items: readonly unknown[]): string[] {
  const seen = new Set<string>();
  for (const item of items) {
    if (typeof item === 'object' && item !== null && 'patient_id' in item && typeof item.patient_id === 'string') seen.add(item.patient_id);
  }
  return [...seen];
}
