/**
 * Rate limits that hold across a hub's nodes (issue 12): requests are counted per bucket and
 * fixed window in the database every node uses, so a client spread over N nodes behind a round
 * robin gets the limit once, not N times. One upsert per request; a window's rows are pruned
 * once it has long ended. A fixed window lets a client burst up to twice the limit across a
 * window boundary, which the in-memory token bucket of a workstation does not; counting in the
 * database is what makes the limit shared.
 */
import type { Clock } from '#server/clock.ts';
import type { RateLimiter } from '#server/http/rate-limit.ts';
import type { Database } from '#server/store/database.ts';
import { countRequest, pruneRateLimits } from '#server/store/rate-limits.ts';

export function createSharedRateLimiter(db: Database, scope: string, capacity: number, windowMs: number, clock: Clock): RateLimiter {
  let prunedWindow = 0;
  return {
    async take(id) {
      const now = clock.now().getTime();
      const windowStart = Math.floor(now / windowMs) * windowMs;
      if (windowStart !== prunedWindow) {
        // Once per window and node; another node doing the same is harmless.
        prunedWindow = windowStart;
        void pruneRateLimits(db, windowStart - windowMs).catch(() => undefined);
      }
      const count = await countRequest(db, `${scope}:${id}`, windowStart);
      if (count <= capacity) return 0;
      return Math.max(1, Math.ceil((windowStart + windowMs - now) / 1000));
    },
  };
}
