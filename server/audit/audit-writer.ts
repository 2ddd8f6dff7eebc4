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
 *
 * A write that fails (a full disk, a database that refuses) is logged and its events are held in
 * memory and tried again after a pause, longer each time, until they are stored: the trail must
 * stay complete, and a disk that filled up is usually freed by someone. At most HELD_MAX events
 * are held; past that the oldest are given up, and the log says how many. `stop` makes one last
 * try and logs what it could not store.
 */
import { recordRefusal } from '#server/audit/audit.ts';
import type { Logger } from '#server/log.ts';
import { insertAuditEvents, type AuditInput } from '#server/store/audit.ts';
import type { Database } from '#server/store/database.ts';

type Kind = 'event' | 'refusal';

export type AuditWriter = {
  /** A request's event; 'refusal' for refused and throttled ones, which are counted per minute. */
  write(event: AuditInput, kind?: Kind): void;
  /**
   * Resolves when every event written before it is stored, or its write failed (logged, and
   * held to be tried again); events held from earlier failures are tried once more first.
   */
  flush(): Promise<void>;
  /** The last flush before the database closes: no more tries after it; what is still held is logged as lost. */
  stop(): Promise<void>;
};

/** How long an event may wait for others to share its commit, and how many may. */
const BATCH_MS = 5;
const BATCH_MAX = 500;
/** Pauses before trying failed writes again; the last one repeats. */
const RETRY_MS = [1000, 2000, 5000, 10_000, 30_000];
/** Events held for another try, at most (a few hundred bytes each). */
const HELD_MAX = 100_000;

type Held = { event: AuditInput; kind: Kind };

export function createAuditWriter(db: Database, log: Logger): AuditWriter {
  const pending = new Set<Promise<void>>();
  let held: Held[] = [];
  let failures = 0;
  let retryTimer: NodeJS.Timeout | undefined;
  let stopped = false;

  const hold = (items: readonly Held[]): void => {
    held.push(...items);
    if (held.length > HELD_MAX) {
      const dropped = held.length - HELD_MAX;
      held = held.slice(dropped);
      log.error('audit.events_dropped', { events: dropped, held: held.length });
    }
    if (retryTimer === undefined && !stopped) {
      retryTimer = setTimeout(retryHeld, RETRY_MS[Math.min(failures, RETRY_MS.length) - 1] ?? RETRY_MS[0]);
      // A pending retry does not keep a CLI command's process alive; stop() makes the last try.
      retryTimer.unref();
    }
  };

  const failed = (err: unknown, items: readonly Held[]): void => {
    failures += 1;
    const first = items[0]?.event;
    log.error('audit.write_failed', {
      request_id: first?.request_id ?? null,
      action: first?.action ?? null,
      events: items.length,
      attempt: failures,
      error: err instanceof Error ? err.name : 'non-error',
    });
    hold(items);
  };

  const track = (write: Promise<void>): void => {
    const tracked = write.finally(() => pending.delete(tracked));
    pending.add(tracked);
  };

  /**
   * Stores `items` in order, each run of events in one statement (all or nothing); what is left
   * after a failure is held again, never what was stored. Resolves whether all were stored.
   */
  const storeOrHold = async (items: readonly Held[]): Promise<boolean> => {
    let done = 0;
    try {
      while (done < items.length) {
        const item = items[done] as Held;
        if (item.kind === 'refusal') {
          await recordRefusal(db, item.event);
          done += 1;
          continue;
        }
        let end = done;
        while (end < items.length && end - done < BATCH_MAX && items[end]?.kind === 'event') end += 1;
        await insertAuditEvents(db, items.slice(done, end).map((i) => i.event));
        done = end;
      }
      return true;
    } catch (err) {
      failed(err, items.slice(done));
      return false;
    }
  };

  /** Tries what is held, in order. */
  function retryHeld(): void {
    clearTimeout(retryTimer);
    retryTimer = undefined;
    if (held.length === 0) return;
    const items = held;
    held = [];
    const attempts = failures;
    track(
      storeOrHold(items).then((stored) => {
        if (!stored) return;
        failures = 0;
        log.info('audit.write_recovered', { events: items.length, attempts });
      }),
    );
  }

  const writeItems = (items: readonly Held[]): void => {
    track(storeOrHold(items).then(() => undefined));
  };

  let batch: AuditInput[] = [];
  let timer: NodeJS.Timeout | undefined;
  let turnQueued = false;
  const writeBatch = (): void => {
    clearTimeout(timer);
    timer = undefined;
    const events = batch;
    batch = [];
    if (events.length > 0) writeItems(events.map((event) => ({ event, kind: 'event' as const })));
  };
  const onHub = db.dialect === 'postgres';

  const flush = async (): Promise<void> => {
    writeBatch();
    retryHeld();
    await Promise.all([...pending]);
  };

  return {
    write(event, kind = 'event') {
      if (kind === 'refusal') return writeItems([{ event, kind }]);
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
    flush,
    async stop() {
      await flush();
      stopped = true;
      clearTimeout(retryTimer);
      retryTimer = undefined;
      if (held.length > 0) log.error('audit.events_lost', { events: held.length });
      held = [];
    },
  };
}
