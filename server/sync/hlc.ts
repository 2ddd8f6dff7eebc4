/**
 * A hybrid logical clock (Kulkarni et al., 2014) that orders the last-writer-wins fields of sync.
 *
 * A timestamp is the greatest wall time this device has seen (its own clock or a peer's), a
 * counter that orders events within one millisecond, and the device id that breaks ties. Its
 * text form sorts as the timestamps do, so the store compares them as strings.
 *
 * What the offline-first tools' users ran into, and what this clock does instead (docs/sync.md):
 * - A local write never fails because of the clock. If the wall clock goes back, the clock keeps
 *   its greatest time and counts up; if the counter would overflow, the time moves on 1 ms.
 * - Timestamps from a peer are checked before they count: over a day ahead of this device's
 *   clock they are refused (one such message must not drag every later write into the future),
 *   over 5 minutes ahead they are taken with a warning.
 * - Taking a peer's timestamps is computed, not applied: the caller applies the result after the
 *   batch that carried them committed, so a failed batch leaves the clock where it was.
 */

export type HlcTimestamp = { wall: number; counter: number; device: string };

/** Refused: further ahead of this device's clock than any honest clock could be. */
export const MAX_AHEAD_MS = 24 * 60 * 60 * 1000;
/** Taken, with a warning that some device's clock is wrong. */
export const WARN_AHEAD_MS = 5 * 60 * 1000;
const MAX_COUNTER = 0xffff;
const WALL_DIGITS = 15;

export function formatHlc(t: HlcTimestamp): string {
  return `${String(t.wall).padStart(WALL_DIGITS, '0')}-${t.counter.toString(16).padStart(4, '0')}-${t.device}`;
}

const PATTERN = /^(\d{15})-([0-9a-f]{4})-([0-9a-z-]{1,64})$/;

/** The timestamp of a text, or undefined when it is not one (from a peer: refuse the change). */
export function parseHlc(text: string): HlcTimestamp | undefined {
  const match = PATTERN.exec(text);
  if (!match) return undefined;
  return { wall: Number(match[1]), counter: Number.parseInt(match[2]!, 16), device: match[3]! };
}

export function compareHlc(a: HlcTimestamp, b: HlcTimestamp): number {
  if (a.wall !== b.wall) return a.wall < b.wall ? -1 : 1;
  if (a.counter !== b.counter) return a.counter < b.counter ? -1 : 1;
  return a.device < b.device ? -1 : a.device > b.device ? 1 : 0;
}

/** After `last`, at least `wall`: the next timestamp of this device. */
function after(last: { wall: number; counter: number }, wall: number, device: string): HlcTimestamp {
  if (wall > last.wall) return { wall, counter: 0, device };
  if (last.counter < MAX_COUNTER) return { wall: last.wall, counter: last.counter + 1, device };
  // 65,536 events in one millisecond, or a clock stuck behind: time moves on instead of failing.
  return { wall: last.wall + 1, counter: 0, device };
}

export type Received =
  | { ok: true; state: { wall: number; counter: number }; warning: string | null }
  | { ok: false; reason: string };

export type Hlc = {
  /** A timestamp for a local event; never fails, never repeats, never goes back. */
  tick(): HlcTimestamp;
  /** What taking these peer timestamps would make the clock; nothing changes until `advance`. */
  receive(remote: readonly HlcTimestamp[]): Received;
  /** Applies a received state once the batch that carried it committed. */
  advance(state: { wall: number; counter: number }): void;
  /** The last timestamp given or taken, to persist. */
  readonly last: { wall: number; counter: number };
};

export function createHlc(device: string, now: () => number, last: { wall: number; counter: number } = { wall: 0, counter: 0 }): Hlc {
  let state = { ...last };
  return {
    tick() {
      const next = after(state, now(), device);
      state = { wall: next.wall, counter: next.counter };
      return next;
    },
    receive(remote) {
      const wallNow = now();
      let merged = { ...state };
      let warning: string | null = null;
      for (const t of remote) {
        const ahead = t.wall - wallNow;
        if (ahead > MAX_AHEAD_MS) {
          return { ok: false, reason: `timestamp ${new Date(t.wall).toISOString()} of device ${t.device} is ${Math.round(ahead / 3_600_000)} h ahead of this clock (at most 24 h)` };
        }
        if (ahead > WARN_AHEAD_MS && warning === null) {
          warning = `device ${t.device} is ${Math.round(ahead / 60_000)} min ahead of this clock: check its time`;
        }
        if (t.wall > merged.wall || (t.wall === merged.wall && t.counter > merged.counter)) merged = { wall: t.wall, counter: t.counter };
      }
      // The next local tick comes after everything received (and after the wall clock).
      return { ok: true, state: merged, warning };
    },
    advance(received) {
      if (received.wall > state.wall || (received.wall === state.wall && received.counter > state.counter)) state = { ...received };
    },
    get last() {
      return { ...state };
    },
  };
}
