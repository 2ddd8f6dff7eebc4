/**
 * A stack's raw frames (GET /v1/instances/{uid}/frames/{n}/raw), loaded once each and kept for
 * the life of the pane: the slice on screen first, then the whole series in the background so
 * scrolling is smooth. One per viewer pane; the primary pane and the comparison panes share it.
 */
import { useCallback, useEffect, useMemo, useRef } from 'react';
import type { Client } from '../api/client.ts';
import { parseRawFrame, type RawFrame } from './frame.ts';
import type { Slice } from './stack.ts';

const PREFETCH_CONCURRENCY = 4;

export function sliceKey(uid: string, frame: number): string {
  return `${uid}#${frame}`;
}

export type Frames = {
  /** The frame of `slice` when loaded, else null. */
  cached(slice: Slice | null): RawFrame | null;
  load(slice: Slice): Promise<RawFrame>;
};

/**
 * `start` is where background loading begins (read when the series changes, not on every
 * scroll step); `concurrency` lets comparison panes load with fewer requests than the primary.
 */
export function useFrames(client: Client, slices: readonly Slice[], start: number, concurrency = PREFETCH_CONCURRENCY): Frames {
  const cache = useRef(new Map<string, RawFrame>());
  const pending = useRef(new Map<string, Promise<RawFrame>>());

  const load = useCallback(
    (target: Slice): Promise<RawFrame> => {
      const key = sliceKey(target.instance.instance_uid, target.frame);
      const cached = cache.current.get(key);
      if (cached) return Promise.resolve(cached);
      const inFlight = pending.current.get(key);
      if (inFlight) return inFlight;
      const promise = client
        .binary(`/v1/instances/${encodeURIComponent(target.instance.instance_uid)}/frames/${target.frame}/raw`, { accept: '*/*' })
        .then(async ({ blob, headers }) => parseRawFrame(await blob.arrayBuffer(), headers))
        .then((parsed) => {
          cache.current.set(key, parsed);
          pending.current.delete(key);
          return parsed;
        });
      pending.current.set(key, promise);
      promise.catch(() => pending.current.delete(key));
      return promise;
    },
    [client],
  );

  const startRef = useRef(start);
  startRef.current = start;
  useEffect(() => {
    let stopped = false;
    const from = startRef.current;
    const order = slices.map((_, i) => i).sort((a, b) => Math.abs(a - from) - Math.abs(b - from));
    let next = 0;
    const worker = async (): Promise<void> => {
      while (!stopped && next < order.length) {
        const target = slices[order[next++] ?? 0];
        if (!target) continue;
        try {
          await load(target);
        } catch {
          // The visible slice reports its own error; background failures are retried on demand.
        }
      }
    };
    const timer = setTimeout(() => {
      for (let i = 0; i < concurrency; i += 1) void worker();
    }, 150);
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
    // Restarts only when the series changes, not on every scroll step.
  }, [slices, load, concurrency]);

  const cached = useCallback((slice: Slice | null) => (slice ? cache.current.get(sliceKey(slice.instance.instance_uid, slice.frame)) ?? null : null), []);
  return useMemo(() => ({ cached, load }), [cached, load]);
}
