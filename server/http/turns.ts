/**
 * Turns for request handlers, so that one event-loop iteration stays short however many
 * requests arrive at once.
 *
 * Node runs every request that became readable in one poll phase before it polls again. On
 * SQLite a handler is synchronous work (a 500-row page is about 12 ms), so 50 clients asking at
 * once made one iteration of 0.6 s; a response larger than the client's socket buffer (128 KB on
 * Linux at first) needs a second write, which waits for the next iteration, then the next: at 50
 * connections with limit=500 some answers took 7 s although each was 12 ms of work. Handlers
 * therefore wait for their turn, first come first served, and each iteration lets in only as
 * many as fit its time budget: the loop polls in between, so pending writes go out and new
 * requests queue behind the old. On PostgreSQL a handler mostly waits for its queries: the
 * iterations stay short and the allowance grows until every waiting handler enters at once.
 *
 * Large pages (500 results: about 10 ms of synchronous work) wait in a lane of their own: an
 * iteration lets in the small callers first and then one large one, so 25 clients paging by 500
 * do not put 25 x 10 ms in front of a 50-row worklist page (that queue was 330 ms at the median
 * for the small pages, measured by bench/api.bench.ts). A large caller still enters every
 * iteration, so the lane cannot starve.
 *
 * The loop accepts one new connection per iteration (libuv 1.45 stopped accepting in a loop:
 * "unix: don't accept() connections in a loop"), so while connections arrive iterations get a
 * quarter of the budget (ARRIVING_SHARE).
 */

/** Target length of one event-loop iteration under load. */
const BUDGET_MS = 20;
/**
 * The budget's share for iterations while new connections arrive. Under limit=500 load at 20 ms
 * iterations, 50 clients connecting at once were accepted one every ~18 ms, the last after
 * 0.92 s, and 11-21 of their first answers took over 1 s; at a quarter of it the 50 were in
 * within 0.39 s and none took 1 s (scratch probe, 2026-11-26, loaded 2-core machine). This
 * quarter was first given to every iteration of large pages alone; it is now given to any
 * iteration within ARRIVAL_WINDOW_MS of a new connection's first request, large pages or not:
 * 50 clients connecting to a server busy with 50-row pages computed afresh (3 ms each) were
 * accepted one every 55-130 ms, and 17-33 of their first answers took over 1 s, the slowest
 * 2.6-3.6 s (bench/api.bench.ts, "a page not kept", 2026-11-28).
 */
const ARRIVING_SHARE = 4;
/** How long after a new connection's first request more are expected. */
const ARRIVAL_WINDOW_MS = 100;
const MAX_ALLOWANCE = 256;

export type Lane = 'small' | 'large';

export type Turns = {
  /** Resolves when this caller may run; callers of a lane run in the order they asked. */
  take(lane?: Lane): Promise<void>;
  /** Callers waiting now. */
  readonly waiting: number;
  /** A request came on a connection not seen before: more may be waiting to be accepted. */
  arrived(): void;
};

export function createTurns(budgetMs = BUDGET_MS): Turns {
  const queue: (() => void)[] = [];
  const largeQueue: (() => void)[] = [];
  let scheduled = false;
  let allowance = 1;
  /** When the last batch was let in and how large it was; null while idle. */
  let last: { at: number; released: number } | null = null;
  let arrivedAt = -Infinity;

  const pump = (): void => {
    scheduled = false;
    const now = performance.now();
    if (last) {
      // The time since the last batch is that batch's synchronous work plus the poll phase
      // between: size the next batch so the iteration fits the budget.
      const iteration = Math.max(now - last.at, 0.05);
      const budget = now - arrivedAt < ARRIVAL_WINDOW_MS ? budgetMs / ARRIVING_SHARE : budgetMs;
      const fitting = Math.floor((last.released * budget) / iteration);
      allowance = Math.max(1, Math.min(MAX_ALLOWANCE, allowance * 2, fitting));
    }
    const batch = queue.splice(0, allowance);
    batch.push(...largeQueue.splice(0, batch.length > 0 ? 1 : allowance));
    for (const release of batch) release();
    // Measured on the next iteration even when none is left waiting: an allowance grown on cheap
    // callers (kept pages) was never measured again while every batch emptied the queue, and let
    // in 20-50 pages computed afresh at once, iterations of 60-130 ms (bench/api.bench.ts).
    if (batch.length > 0) {
      last = { at: now, released: batch.length };
      scheduled = true;
      // An immediate queued from the check phase runs on the next iteration, after a poll.
      setImmediate(pump);
    } else {
      last = null;
    }
  };

  return {
    take(lane = 'small') {
      return new Promise<void>((resolve) => {
        (lane === 'large' ? largeQueue : queue).push(resolve);
        if (!scheduled) {
          scheduled = true;
          setImmediate(pump);
        }
      });
    },
    get waiting() {
      return queue.length + largeQueue.length;
    },
    arrived() {
      arrivedAt = performance.now();
    },
  };
}
