/**
 * Audit events of requests are written after their response, off the request's path; this part
 * of the runtime keeps those writes in flight so that nothing reads around them or drops them: a
 * read of the trail on this node waits for them (a caller sees its own requests), and the
 * runtime's stop waits for them before the database closes (an event is never lost to a
 * shutdown). A failed write (a full disk) is logged and does not fail the request.
 */
import { recordAudit, recordRefusal } from '#server/audit/audit.ts';
import type { Logger } from '#server/log.ts';
import type { AuditInput } from '#server/store/audit.ts';
import type { Database } from '#server/store/database.ts';

export type AuditWriter = {
  /** A request's event; 'refusal' for refused and throttled ones, which are counted per minute. */
  write(event: AuditInput, kind?: 'event' | 'refusal'): void;
  /** Resolves when every write started before it has finished. */
  flush(): Promise<void>;
};

export function createAuditWriter(db: Database, log: Logger): AuditWriter {
  const pending = new Set<Promise<void>>();
  return {
    write(event, kind = 'event') {
      const write = (kind === 'refusal' ? recordRefusal : recordAudit)(db, event)
        .catch((err: unknown) => {
          log.error('audit.write_failed', { request_id: event.request_id, action: event.action, error: err instanceof Error ? err.name : 'non-error' });
        })
        .finally(() => pending.delete(write));
      pending.add(write);
    },
    async flush() {
      await Promise.all([...pending]);
    },
  };
}
