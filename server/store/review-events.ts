/** SQL for verdict events (migration 17): appended, never changed; the finding holds the derived verdict. */
import type { FindingReview } from '#common/vocabulary.ts';
import type { Database } from '#server/store/database.ts';

export type ReviewEventRow = {
  event_id: string;
  finding_ref: number;
  verdict: FindingReview | null;
  reason: string | null;
  user_id: string | null;
  hlc: string;
  /** JSON array of event ids. */
  supersedes: string;
  created_at: string;
};

export async function listReviewEvents(db: Database, findingRef: number): Promise<ReviewEventRow[]> {
  return (await db.all('SELECT event_id, finding_ref, verdict, reason, user_id, hlc, supersedes, created_at FROM review_events WHERE finding_ref = ? ORDER BY hlc, event_id', [findingRef])) as ReviewEventRow[];
}

export async function reviewEventExists(db: Database, eventId: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS one FROM review_events WHERE event_id = ?', [eventId])) !== undefined;
}

export async function insertReviewEvent(db: Database, e: ReviewEventRow): Promise<void> {
  await db.run(`INSERT INTO review_events (event_id, finding_ref, verdict, reason, user_id, hlc, supersedes, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, [e.event_id, e.finding_ref, e.verdict, e.reason, e.user_id, e.hlc, e.supersedes, e.created_at]);
}

export async function setFindingDisputed(db: Database, findingRef: number, disputed: boolean): Promise<void> {
  await db.run('UPDATE findings SET review_disputed = ? WHERE id = ?', [disputed ? 1 : 0, findingRef]);
}
