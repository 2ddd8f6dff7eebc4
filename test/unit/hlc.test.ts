/**
 * The hybrid logical clock that orders sync's last-writer-wins fields (server/sync/hlc.ts): local
 * writes never fail on a bad clock, peers' timestamps are checked and only applied after commit.
 */
import { describe, expect, it } from 'vitest';
import { compareHlc, createHlc, formatHlc, parseHlc, type HlcTimestamp } from '#server/sync/hlc.ts';

const T0 = Date.parse('2026-11-25T10:00:00.000Z');
const MINUTE = 60_000;

function clockAt(start: number): { now: () => number; set: (ms: number) => void } {
  let wall = start;
  return { now: () => wall, set: (ms) => (wall = ms) };
}

function expectIncreasing(stamps: readonly HlcTimestamp[]): void {
  for (let i = 1; i < stamps.length; i++) {
    expect(compareHlc(stamps[i - 1]!, stamps[i]!)).toBe(-1);
    // The stored text sorts the same way.
    expect(formatHlc(stamps[i - 1]!) < formatHlc(stamps[i]!)).toBe(true);
  }
}

describe('hybrid logical clock', () => {
  it('keeps counting forward when the wall clock jumps back ten minutes', () => {
    const clock = clockAt(T0);
    const hlc = createHlc('dev-a', clock.now);
    const before = [hlc.tick(), hlc.tick()];
    clock.set(T0 - 10 * MINUTE);
    const after = [hlc.tick(), hlc.tick(), hlc.tick()];
    expectIncreasing([...before, ...after]);
    expect(after.every((t) => t.wall === T0)).toBe(true);
    clock.set(T0 + MINUTE);
    expect(hlc.tick()).toEqual({ wall: T0 + MINUTE, counter: 0, device: 'dev-a' });
  });

  it('never fails when one millisecond holds more events than the counter', () => {
    const hlc = createHlc('dev-a', () => T0);
    const stamps = Array.from({ length: 70_000 }, () => hlc.tick());
    expectIncreasing([stamps[0]!, stamps[65_535]!, stamps[65_536]!, stamps[69_999]!]);
    expect(stamps[65_536]!.wall).toBe(T0 + 1);
  });

  it('refuses a peer timestamp over a day ahead and stays where it was', () => {
    const hlc = createHlc('hub', () => T0);
    hlc.tick();
    const before = hlc.last;
    const received = hlc.receive([{ wall: T0 + 25 * 60 * MINUTE, counter: 0, device: 'dev-b' }]);
    expect(received.ok).toBe(false);
    if (!received.ok) expect(received.reason).toMatch(/dev-b is 25 h ahead/);
    expect(hlc.last).toEqual(before);
    expect(hlc.tick().wall).toBe(T0);
  });

  it('takes a peer ten minutes ahead with a warning, and only once its batch committed', () => {
    const hlc = createHlc('hub', () => T0);
    const remote = { wall: T0 + 10 * MINUTE, counter: 3, device: 'dev-b' };
    const received = hlc.receive([remote]);
    expect(received).toMatchObject({ ok: true, warning: expect.stringMatching(/dev-b is 10 min ahead/) });
    // The batch failed: nothing was applied.
    expect(hlc.tick().wall).toBe(T0);
    if (received.ok) hlc.advance(received.state);
    const next = hlc.tick();
    expect(compareHlc(remote, next)).toBe(-1);
    expect(next).toEqual({ wall: T0 + 10 * MINUTE, counter: 4, device: 'hub' });
  });

  it('does not go back when an older state is applied', () => {
    const clock = clockAt(T0);
    const hlc = createHlc('dev-a', clock.now);
    const first = hlc.tick();
    hlc.advance({ wall: T0 - MINUTE, counter: 9 });
    expect(compareHlc(first, hlc.tick())).toBe(-1);
  });

  it('reads back what it writes and refuses text that is not a timestamp', () => {
    const t = { wall: T0, counter: 0x1f, device: '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b' };
    expect(parseHlc(formatHlc(t))).toEqual(t);
    for (const bad of ['', '1764064800000-0001-dev', `${'9'.repeat(15)}-00001-dev`, `${'0'.repeat(15)}-0001-DEV`, `${'0'.repeat(15)}-0001-${'a'.repeat(65)}`]) {
      expect(parseHlc(bad)).toBeUndefined();
    }
  });
});
