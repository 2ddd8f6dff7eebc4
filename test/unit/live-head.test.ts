/**
 * The hub's live head stream (server/sync/live.ts) over a real SQLite store: it sends the head
 * now, and its waits between polls leave nothing on the stream's abort signal (one listener a
 * second piled up for the stream's ten minutes).
 */
import { getEventListeners } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LIVE_POLL_MS, liveHead } from '#server/sync/live.ts';
import { openDatabase } from '#server/store/sqlite.ts';

const dir = mkdtempSync(join(tmpdir(), 'mia-live-'));
const db = openDatabase(dir);
afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('live head stream', () => {
  it('sends the head and keeps at most one listener on its signal across polls', { timeout: 20_000 }, async () => {
    const controller = new AbortController();
    const events: { event: string; data: unknown }[] = [];
    const listeners: number[] = [];
    const sink = {
      signal: controller.signal,
      send(event: string, data: unknown) {
        events.push({ event, data });
      },
    };
    const run = liveHead(db, 'dev_none', 3.5 * LIVE_POLL_MS)(sink);
    const sampler = setInterval(() => listeners.push(getEventListeners(controller.signal, 'abort').length), LIVE_POLL_MS / 4);
    await run;
    clearInterval(sampler);
    expect(events[0]?.event).toBe('head');
    // Three polls waited: a listener left by each would show as 2 and 3.
    expect(listeners.length).toBeGreaterThanOrEqual(10);
    expect(Math.max(...listeners)).toBeLessThanOrEqual(1);
  });
});
