/**
 * API keys found by their digest, kept while the store's read version is unchanged
 * (Database.readVersion): every request looks its key up, and the lookup was ~40 us of the
 * ~650 us a kept results page costs the server (CPU profile of bench/api.bench.ts, limit 50,
 * 2026-11-28). Any committed write, by this process or another (a key revoked or rotated, a user
 * disabled, last_used_at touched), ends every kept key, so a refusal takes effect with the next
 * request as before. PostgreSQL has no read version: every request asks the database.
 */
import type { Database } from '#server/store/database.ts';
import { findApiKeyByDigest } from '#server/store/api-keys.ts';

type Found = NonNullable<Awaited<ReturnType<typeof findApiKeyByDigest>>>;

/** Keys kept at most: a hospital's integrations and workstations, not every digest ever sent. */
const KEPT = 1024;

const memos = new WeakMap<Database, { version: string; byDigest: Map<string, Found> }>();

export async function findKnownApiKey(db: Database, digest: string): Promise<Found | undefined> {
  const version = db.readVersion();
  if (version === null) return await findApiKeyByDigest(db, digest);
  let memo = memos.get(db);
  if (memo?.version !== version) memos.set(db, (memo = { version, byDigest: new Map() }));
  const kept = memo.byDigest.get(digest);
  if (kept) return kept;
  const found = await findApiKeyByDigest(db, digest);
  // Unknown digests are not kept (anyone can send those), nor a row read across a write.
  if (found && db.readVersion() === version && memo.byDigest.size < KEPT) memo.byDigest.set(digest, found);
  return found;
}
