/**
 * Live sync (docs/sync.md, Transport): a workstation keeps one Server-Sent Events stream open to
 * its hub, which says whenever a change for it has been committed (`head`: the newest change
 * number it would pull); the workstation then runs a round at once instead of at its next
 * interval. The stream only says when to look: the round is the same pull as ever, so a lost or
 * duplicated event costs nothing but a round, and without the stream sync still happens on the
 * interval.
 *
 * The hub looks at its log once a second per stream (the newest number is an index lookup); the
 * stream ends after LIVE_MAX_MS and the workstation opens another, so a hub that was restarted or
 * a proxy that holds idle connections cannot leave a workstation listening to nothing for long.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { EventSink } from '#server/http/route.ts';
import type { Database } from '#server/store/database.ts';
import { readNewestForDevice } from '#server/store/sync-log.ts';
import { SYNC_PROTOCOL } from '#server/api/sync-schemas.ts';
import type { HubLink } from '#server/sync/hub-link.ts';

export const LIVE_POLL_MS = 1000;
export const LIVE_MAX_MS = 10 * 60_000;

/** The hub's side: a `head` event now and whenever the newest change for the device moves. */
export function liveHead(db: Database, deviceId: string, waitMs = LIVE_MAX_MS): (sink: EventSink) => Promise<void> {
  return async (sink) => {
    const ends = Date.now() + Math.min(waitMs, LIVE_MAX_MS);
    let sent = -1;
    for (let first = true; first || (!sink.signal.aborted && Date.now() < ends); first = false) {
      const head = await readNewestForDevice(db, deviceId);
      if (head !== sent) {
        sink.send('head', { head });
        sent = head;
      }
      if (Date.now() >= ends) break;
      // Ends early on abort and takes its listener off the signal when the time comes first (one
      // left per poll piled up on the signal for the stream's ten minutes).
      await sleep(LIVE_POLL_MS, undefined, { signal: sink.signal }).catch(() => undefined);
    }
  };
}

/**
 * The workstation's side: follows the stream until it ends or `signal` aborts, calling `onHead`
 * with each newest change number. Resolves when the stream ends (the caller opens another later);
 * throws when it cannot be opened.
 */
export async function followLive(link: HubLink, signal: AbortSignal, onHead: (head: number) => void): Promise<void> {
  const res = await fetch(new URL('/v1/sync/pull/live', link.url), {
    headers: { authorization: `Bearer ${link.key}`, 'mia-sync-protocol': String(SYNC_PROTOCOL), accept: 'text/event-stream' },
    signal,
  });
  if (!res.ok || !res.body) throw new Error(`live sync: the hub answered ${res.status}`);
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    // An event ends with a blank line; anything longer than a few KB is not one of ours.
    if (buffered.length > 64 * 1024) throw new Error('live sync: the hub sent an event this mia cannot read');
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const block = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const lines = block.split('\n');
      if (!lines.includes('event: head')) continue;
      const data = lines.find((l) => l.startsWith('data: '));
      try {
        const parsed = JSON.parse(data?.slice(6) ?? '') as { head?: unknown };
        if (typeof parsed.head === 'number' && Number.isSafeInteger(parsed.head)) onHead(parsed.head);
      } catch {
        // Not an event of ours: the round on the interval still comes.
      }
    }
  }
}

export const liveQuery = z.object({
  wait: z.coerce.number().int().min(0).max(LIVE_MAX_MS / 1000).default(LIVE_MAX_MS / 1000).describe('Seconds to keep the stream open (0: the current head, then the end)'),
}).strict();
