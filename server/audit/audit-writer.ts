/**
 * Audit events of requests are written after their response, off the request's path; this part
 * of the runtime keeps those writes in flight so that nothing reads around them or drops them: a
 * read of the trail on this node waits for them (a caller sees its own requests), and the
 * runtime's stop waits for them before the database closes (an event is never lost to a
 * shutdown). A failed write (a full disk) is logged and does not fail the request.
 *
 * Events are written a batch at a time, in one statement and one commit. On a hub a batch is the
 * events of a few milliseconds: on PostgreSQL every commit waits for its WAL to reach the disk,
 * and one per request was a third of a request's database time. On a workstation a batch is the
 * events of one event-loop turn, written at the next check phase (setImmediate): one commit
 * instead of one per request (a turn under load holds 10-30 requests' events; 82 -> 30 us an
 * event at 10 a commit).
 *
 * What this changes for an event's durability: it was inserted in its response's 'close'
 * callback, after the answer had been handed to the socket, so a process killed between the two
 * lost it; now the window runs to the next check phase, at most one poll of the loop later, and
 * ends before any handler that asked for its turn after the event was queued runs (turns are
 * setImmediate callbacks too, run in order). So a request a client sends once it has an answer
 * is answered after that answer's event is committed. A process stopped (`stop()`, as on
 * SIGTERM) flushes first. test/faults/audit-kill.test.ts stops, and kills after one more round
 * trip, a serving process and counts the trail.
 */
import { recordRefusal } from '#server/audit/audit.ts';
import type { Logger } from '#server/log.ts';
import { insertAuditEvents, type AuditInput } from '#server/store/audit.ts';
import type { Database } from '#server/store/database.ts';

export type AuditWriter = {
  /** A request's event; 'refusal' for refused and throttled ones, which are counted per minute. */
  write(event: AuditInput, kind?: 'event' | 'refusal'): void;
  /** Resolves when every event written before it is stored (or its failure logged). */
  flush(): Promise<void>;
};

/** How long an event may wait for others to share its commit, and how many may. */
const BATCH_MS = 5;
const BATCH_MAX = 500;

export function createAuditWriter(db: Database, log: Logger): AuditWriter {
  const pending = new Set<Promise<void>>();
  const track = (write: Promise<void>, events: readonly AuditInput[]): void => {
    const tracked = write
      .catch((err: unknown) => {
        const first = events[0];
        log.error('audit.write_failed', {
          request_id: first?.request_id ?? null,
          action: first?.action ?? null,
          events: events.length,
          error: err instanceof Error ? err.name : 'non-error',
        });
      })
      .finally(() => pending.delete(tracked));
    pending.add(tracked);
  };

  let batch: AuditInput[] = [];
  let timer: NodeJS.Timeout | undefined;
  let turnQueued = false;
  const writeBatch = (): void => {
    clearTimeout(timer);
    timer = undefined;
    const events = batch;
    batch = [];
    if (events.length > 0) track(insertAuditEvents(db, events), events);
  };
  const onHub = db.dialect === 'postgres';

  return {
    write(event, kind = 'event') {
      if (kind === 'refusal') return track(recordRefusal(db, event), [event]);
      batch.push(event);
      if (batch.length >= BATCH_MAX) writeBatch();
      else if (timer === undefined && !turnQueued) {
        if (onHub) timer = setTimeout(writeBatch, BATCH_MS);
        else {
          turnQueued = true;
          setImmediate(() => {
            turnQueued = false;
            writeBatch();
          });
        }
      }
    },
    async flush() {
      writeBatch();
      await Promise.all([...pending]);
    },
  };
}
