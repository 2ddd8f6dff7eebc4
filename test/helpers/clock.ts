/** A clock the test moves by hand: the one test double at the edge of time. */
import type { Clock } from '#server/clock.ts';

export type ManualClock = Clock & { advance(ms: number): void; set(date: Date): void };

export function manualClock(start = new Date('2026-03-01T08:00:00.000Z')): ManualClock {
  let now = start.getTime();
  return {
    now: () => new Date(now),
    advance: (ms) => {
      now += ms;
    },
    set: (date) => {
      now = date.getTime();
    },
  };
}
