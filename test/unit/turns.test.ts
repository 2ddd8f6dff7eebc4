/**
 * Turns for request handlers (server/http/turns.ts): first come first served, the event loop
 * polls between handlers that do long synchronous work (so a large answer's pending writes and
 * new requests are not held behind a whole burst), and cheap handlers are not throttled.
 */
import { describe, expect, it } from 'vitest';
import { createTurns } from '#server/http/turns.ts';

function busy(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Synchronous work, as a page built from SQLite is.
  }
}

describe('turns', () => {
  it('lets callers in in the order they asked', async () => {
    const turns = createTurns();
    const order: number[] = [];
    await Promise.all(Array.from({ length: 40 }, (_, i) => turns.take().then(() => order.push(i))));
    expect(order).toEqual(Array.from({ length: 40 }, (_, i) => i));
    expect(turns.waiting).toBe(0);
  });

  it('returns to the event loop between callers that each work longer than the budget', async () => {
    const turns = createTurns(20);
    const events: string[] = [];
    const callers = Array.from({ length: 8 }, (_, i) =>
      turns.take().then(() => {
        events.push(`caller ${i}`);
        busy(30);
      }),
    );
    // Stands for a pending write or a new request: it needs the loop to poll once.
    const timer = new Promise<void>((resolve) => setTimeout(() => {
      events.push('timer');
      resolve();
    }, 0));
    await Promise.all([...callers, timer]);
    // Without turns all eight would run (240 ms) before the loop polled again.
    expect(events.indexOf('timer')).toBeLessThanOrEqual(2);
    expect(events.filter((e) => e !== 'timer')).toEqual(Array.from({ length: 8 }, (_, i) => `caller ${i}`));
  });

  it('lets a burst of cheap callers in within a few iterations', async () => {
    const turns = createTurns(20);
    let iterations = 0;
    let counting = true;
    const tick = (): void => {
      iterations += 1;
      if (counting) setImmediate(tick);
    };
    setImmediate(tick);
    await Promise.all(Array.from({ length: 200 }, () => turns.take()));
    counting = false;
    // The allowance doubles while iterations stay short: 1 + 2 + ... + 128 >= 200 by the 8th.
    expect(iterations).toBeLessThanOrEqual(10);
  });

  it('sizes its batches again when work gets dearer, even when each batch empties the queue', async () => {
    const turns = createTurns(20);
    // Cheap callers (kept pages) grow the allowance to its most.
    await Promise.all(Array.from({ length: 300 }, () => turns.take()));
    // Then 20 connections each asking again as soon as answered, 3 ms of work a time (pages
    // computed afresh): every batch lets in all who wait, so the queue is empty after each.
    let inThisIteration = 0;
    const perIteration: number[] = [];
    let counting = true;
    const tick = (): void => {
      if (inThisIteration > 0) perIteration.push(inThisIteration);
      inThisIteration = 0;
      if (counting) setImmediate(tick);
    };
    setImmediate(tick);
    await Promise.all(
      Array.from({ length: 20 }, async () => {
        for (let round = 0; round < 8; round++) {
          await turns.take();
          inThisIteration += 1;
          busy(3);
        }
      }),
    );
    counting = false;
    // The first batch goes by the old allowance; after it, about 20 ms of work an iteration.
    expect(Math.max(...perIteration.slice(2))).toBeLessThanOrEqual(10);
  });

  it('lets fewer callers in each iteration while new connections are arriving, so the loop accepts them sooner', async () => {
    /** The most callers let in between two polls, for 80 callers of 3 ms each (enough iterations for the allowance to grow on a slow host). */
    const mostInOneIteration = async (arriving: boolean): Promise<number> => {
      const turns = createTurns(20);
      let inThisIteration = 0;
      let most = 0;
      let counting = true;
      const tick = (): void => {
        most = Math.max(most, inThisIteration);
        inThisIteration = 0;
        if (counting) setImmediate(tick);
      };
      setImmediate(tick);
      await Promise.all(
        Array.from({ length: 80 }, () => {
          if (arriving) turns.arrived();
          return turns.take().then(() => {
            // Each caller is another connection's first request.
            if (arriving) turns.arrived();
            inThisIteration += 1;
            busy(3);
          });
        }),
      );
      counting = false;
      return Math.max(most, inThisIteration);
    };
    // A quarter of the 20 ms budget fits one 3 ms caller; the whole of it six.
    expect(await mostInOneIteration(true)).toBeLessThanOrEqual(2);
    expect(await mostInOneIteration(false)).toBeGreaterThanOrEqual(4);
  });

  it('lets small callers in ahead of a queue of large ones, and still one large one each iteration', async () => {
    const turns = createTurns(20);
    const events: string[] = [];
    const large = Array.from({ length: 6 }, (_, i) =>
      turns.take('large').then(() => {
        events.push(`large ${i}`);
        busy(15);
      }),
    );
    const small = Array.from({ length: 3 }, (_, i) => turns.take('small').then(() => events.push(`small ${i}`)));
    await Promise.all([...large, ...small]);
    // Asked after all six large ones, the small ones still enter ahead of them: an iteration lets
    // in at least one small caller and at most one large one while small ones wait, so the third
    // small one is in before the fourth large one however the iterations are sized (a host that
    // slows the timing keeps the allowance at one). First come, first served would put all six
    // large ones first.
    expect(events.indexOf('small 2')).toBeLessThan(events.indexOf('large 3'));
    expect(events.filter((e) => e.startsWith('large'))).toEqual(Array.from({ length: 6 }, (_, i) => `large ${i}`));
  });
});
