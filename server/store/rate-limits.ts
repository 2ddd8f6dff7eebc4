/** SQL for request counts per bucket and window, shared by a hub's nodes (migration 14). */
import type { Database } from '#server/store/database.ts';

/** Counts one request in the bucket's window and resolves with the window's count so far. */
export async function countRequest(db: Database, bucket: string, windowStart: number): Promise<number> {
  const row = await db.get<{ count: number }>(
    `INSERT INTO rate_limits (bucket, window_start, count) VALUES (?, ?, 1)
     ON CONFLICT (bucket, window_start) DO UPDATE SET count = rate_limits.count + 1
     RETURNING count`,
    [bucket, windowStart],
  );
  return row?.count ?? 1;
}

/** Forgets windows that ended before `before` (ms since the epoch). */
export async function pruneRateLimits(db: Database, before: number): Promise<number> {
  return await db.run('DELETE FROM rate_limits WHERE window_start < ?', [before]);
}
