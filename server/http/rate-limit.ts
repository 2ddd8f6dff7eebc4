/**
 * Token-bucket rate limiting, per API key (or per address for requests without one), plus a
 * stricter bucket per address for failed authentications so keys cannot be guessed quickly.
 * Buckets live in memory: a restart resets them, which is acceptable for a single process (the
 * workstation). A hub's nodes count in the database instead (shared-rate-limit.ts).
 */
import type { Clock } from '#server/clock.ts';

export type Bucket = { tokens: number; updatedAt: number };

export type RateLimiter = {
  /** Takes one token; resolves with 0 when allowed, else the seconds until one is available. */
  take(id: string): Promise<number>;
};

const MAX_BUCKETS = 10_000;

export function createRateLimiter(capacity: number, windowMs: number, clock: Clock): RateLimiter {
  const buckets = new Map<string, Bucket>();
  const perMs = capacity / windowMs;

  const refill = (id: string): Bucket => {
    const now = clock.now().getTime();
    const bucket = buckets.get(id) ?? { tokens: capacity, updatedAt: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + (now - bucket.updatedAt) * perMs);
    bucket.updatedAt = now;
    if (!buckets.has(id)) {
      if (buckets.size >= MAX_BUCKETS) prune(now);
      buckets.set(id, bucket);
    }
    return bucket;
  };

  // Full buckets carry no information, so dropping them bounds memory without loosening limits.
  const prune = (now: number): void => {
    for (const [id, bucket] of buckets) {
      if (bucket.tokens + (now - bucket.updatedAt) * perMs >= capacity) buckets.delete(id);
    }
  };

  const waitSeconds = (bucket: Bucket): number => Math.max(1, Math.ceil((1 - bucket.tokens) / perMs / 1000));

  return {
    take(id) {
      const bucket = refill(id);
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return Promise.resolve(0);
      }
      return Promise.resolve(waitSeconds(bucket));
    },
  };
}
