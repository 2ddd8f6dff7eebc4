import { describe, expect, it } from 'vitest';
import { UUID7_PATTERN, uuid7 } from '#server/sync/uuid7.ts';

describe('uuid7', () => {
  it('carries the milliseconds in its first 48 bits, version 7 and variant 10', () => {
    for (const ms of [0, 1, 1_764_230_400_123, 2 ** 48 - 1]) {
      const id = uuid7(ms);
      expect(id).toMatch(UUID7_PATTERN);
      expect(id.replaceAll('-', '').slice(0, 12)).toBe(ms.toString(16).padStart(12, '0'));
    }
  });

  it('sorts by time, and never repeats across many pools of random bytes', () => {
    const ids = Array.from({ length: 2_000 }, (_, i) => uuid7(1_764_230_400_000 + Math.floor(i / 10)));
    expect(new Set(ids).size).toBe(ids.length);
    const byTime = ids.map((id) => id.slice(0, 13));
    expect([...byTime].sort()).toEqual(byTime);
  });
});
