/** The one source of "now", injectable so tests can cross the 24-hour rotation line. */
export type Clock = { now(): Date };

export const systemClock: Clock = { now: () => new Date() };

export function isoAt(clock: Clock): string {
  return clock.now().toISOString();
}
