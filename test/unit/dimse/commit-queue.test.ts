import { describe, expect, it } from 'vitest';
import { createCommitQueue } from '#server/dimse/commit-queue.ts';

/** A commit that records each call's items and ends when the test says so. */
function gatedCommit(): { calls: number[][]; open(): void; commit: (items: readonly number[]) => Promise<string[]> } {
  const calls: number[][] = [];
  const gates: Array<() => void> = [];
  return {
    calls,
    open: () => gates.shift()?.(),
    commit: (items) => {
      calls.push([...items]);
      return new Promise<string[]>((resolve) => gates.push(() => resolve(items.map((i) => `done ${i}`))));
    },
  };
}

const tick = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('the C-STORE commit queue', () => {
  it('commits a lone item at once, and the items that arrive meanwhile together in the next commit', async () => {
    const c = gatedCommit();
    const queue = createCommitQueue(c.commit, 10);
    const first = queue.submit(1);
    await tick();
    expect(c.calls).toEqual([[1]]);
    const later = [queue.submit(2), queue.submit(3), queue.submit(4)];
    await tick();
    expect(c.calls).toEqual([[1]]);
    c.open();
    expect(await first).toBe('done 1');
    await tick();
    expect(c.calls).toEqual([[1], [2, 3, 4]]);
    c.open();
    expect(await Promise.all(later)).toEqual(['done 2', 'done 3', 'done 4']);
  });

  it('holds a commit for an item reserved before it, not for one reserved after it started', async () => {
    const c = gatedCommit();
    const queue = createCommitQueue(c.commit, 10);
    const slot = queue.reserve();
    const first = queue.submit(1);
    await tick();
    expect(c.calls).toEqual([]);
    const second = slot.submit(2);
    await tick();
    expect(c.calls).toEqual([[1, 2]]);
    const late = queue.reserve();
    const third = queue.submit(3);
    c.open();
    await Promise.all([first, second]);
    await tick();
    // The late reservation was made while [1, 2] committed: the next commit waits for it too,
    // and a cancelled one releases it.
    expect(c.calls).toEqual([[1, 2]]);
    late.cancel();
    await tick();
    expect(c.calls).toEqual([[1, 2], [3]]);
    c.open();
    expect(await third).toBe('done 3');
  });

  it('fails only the items of a commit that fails, and goes on with the next', async () => {
    let calls = 0;
    const queue = createCommitQueue(async (items: readonly number[]) => {
      calls += 1;
      await tick();
      if (calls === 2) throw new Error('disk full');
      return items.map((i) => i * 10);
    }, 10);
    const a = queue.submit(1);
    const [b, c] = [queue.submit(2), queue.submit(3)];
    expect(await a).toBe(10);
    await expect(b).rejects.toThrow('disk full');
    await expect(c).rejects.toThrow('disk full');
    expect(await queue.submit(4)).toBe(40);
  });

  it('splits what waits into commits of at most the bound', async () => {
    const c = gatedCommit();
    const queue = createCommitQueue(c.commit, 2);
    const all = [1, 2, 3, 4, 5].map((i) => queue.submit(i));
    for (let i = 0; i < 3; i++) {
      await tick();
      c.open();
    }
    expect(await Promise.all(all)).toEqual(['done 1', 'done 2', 'done 3', 'done 4', 'done 5']);
    expect(c.calls).toEqual([[1], [2, 3], [4, 5]]);
  });
});
