/**
 * Anti-entropy (GET /v1/sync/digest, docs/sync.md): per synced entity, a count and a SHA-256 over
 * its rows' names and contents in a fixed order. Two replicas holding the same set give the same
 * digest, so a check needs two small answers, not a comparison of every row. `studies` narrows
 * it to the studies a workstation holds, which is what it can compare with the hub.
 */
import { createHash } from 'node:crypto';
import type { Database } from '#server/store/database.ts';
import { readDigestRows } from '#server/store/sync-digest.ts';

export type EntityDigest = { count: number; sha256: string };
export type Digest = { instance: EntityDigest; analysis: EntityDigest; review: EntityDigest; report: EntityDigest };

function digestOf(lines: readonly string[]): EntityDigest {
  const hash = createHash('sha256');
  for (const line of lines) hash.update(line).update('\n');
  return { count: lines.length, sha256: hash.digest('hex') };
}

export async function computeDigest(db: Database, studies: readonly string[] | null): Promise<Digest> {
  const rows = await readDigestRows(db, studies);
  return { instance: digestOf(rows.instances), analysis: digestOf(rows.analyses), review: digestOf(rows.reviews), report: digestOf(rows.reports) };
}
