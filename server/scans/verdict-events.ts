/**
 * Verdicts as append-only events (docs/sync.md, Verdicts). A reader's verdict is an event that
 * names the events it has seen (the current ones where it was made); a verdict from another
 * workstation is another event. What a finding shows is derived from all of them:
 *
 * - the current events are those no other event has seen (the heads);
 * - the verdict is the head with the highest HLC;
 * - heads with different verdicts (made apart, neither seeing the other) make it disputed, until a
 *   reader who sees them all records a verdict, which supersedes them.
 *
 * Deriving instead of overwriting is what lets every replica reach the same verdict whatever order
 * the events arrive in, with the whole history kept.
 */
import type { FindingReview } from '#common/vocabulary.ts';
import { setFindingReview } from '#server/store/analyses.ts';
import type { Database } from '#server/store/database.ts';
import { insertReviewEvent, listHeadEvents, setFindingDisputed, type ReviewEventRow } from '#server/store/review-events.ts';
import { findUserByPublicId } from '#server/store/users.ts';
import { formatHlc } from '#server/sync/hlc.ts';
import { recordChanges, type Replica } from '#server/sync/replica.ts';
import { uuid7 } from '#server/sync/uuid7.ts';

const supersededBy = (e: ReviewEventRow): string[] => JSON.parse(e.supersedes) as string[];

export function deriveVerdict(events: readonly ReviewEventRow[]): { current: ReviewEventRow | undefined; heads: ReviewEventRow[]; disputed: boolean } {
  const seen = new Set(events.flatMap(supersededBy));
  const heads = events.filter((e) => !seen.has(e.event_id));
  const byHlc = (a: ReviewEventRow, b: ReviewEventRow): number => (a.hlc < b.hlc ? -1 : a.hlc > b.hlc ? 1 : a.event_id < b.event_id ? -1 : a.event_id > b.event_id ? 1 : 0);
  const current = [...heads].sort(byHlc).at(-1);
  const disputed = new Set(heads.map((e) => e.verdict ?? 'cleared')).size > 1;
  return { current, heads, disputed };
}

/** Writes the derived verdict into the finding's columns, which every reader of findings uses. */
export async function applyDerivedVerdict(tx: Database, findingRef: number): Promise<{ disputed: boolean }> {
  const { current, disputed } = deriveVerdict(await listHeadEvents(tx, findingRef));
  const verdict = current?.verdict ?? null;
  const user = verdict !== null && current?.user_id ? await findUserByPublicId(tx, current.user_id) : undefined;
  await setFindingReview(tx, findingRef, verdict, user?.id ?? null, verdict === null ? null : (current?.created_at ?? null), verdict === 'rejected' ? (current?.reason ?? null) : null);
  await setFindingDisputed(tx, findingRef, disputed);
  return { disputed };
}

export type LocalVerdict = {
  finding: { ref: number; publicId: string };
  verdict: FindingReview | null;
  reason: string | null;
  /** The reader: their row, and their public id, which travels. */
  user: { ref: number; id: string };
  at: string;
};

/**
 * A reader's verdict here: an event that supersedes every current one, the finding's columns, and
 * its change for sync, in the caller's transaction.
 */
export async function recordVerdict(tx: Database, replica: Replica, v: LocalVerdict): Promise<void> {
  const heads = await listHeadEvents(tx, v.finding.ref);
  const hlc = formatHlc(replica.hlc.tick());
  const event: ReviewEventRow = {
    event_id: uuid7(Date.parse(v.at)),
    finding_ref: v.finding.ref,
    verdict: v.verdict,
    reason: v.verdict === 'rejected' ? v.reason : null,
    user_id: v.user.id,
    hlc,
    supersedes: JSON.stringify(heads.map((e) => e.event_id)),
    created_at: v.at,
  };
  await insertReviewEvent(tx, event);
  await setFindingReview(tx, v.finding.ref, v.verdict, v.verdict === null ? null : v.user.ref, v.verdict === null ? null : v.at, event.reason);
  await setFindingDisputed(tx, v.finding.ref, false);
  await recordChanges(tx, replica, [{
    entity: 'review',
    key: event.event_id,
    op: 'put',
    userId: v.user.id,
    hlc,
    payload: { finding_id: v.finding.publicId, verdict: v.verdict, reason: event.reason, supersedes: heads.map((e) => e.event_id), created_at: v.at },
  }]);
}
