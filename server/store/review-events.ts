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

export async function reviewEventExists(db: Database, eventId: string): Promise<boolean> {
  return (await db.get('SELECT 1 AS one FROM review_events WHERE event_id = ?', [eventId])) !== undefined;
}

/** The events of a finding that no other event has seen: what its verdict is derived from. */
export async function listHeadEvents(db: Database, findingRef: number): Promise<ReviewEventRow[]> {
  return (await db.all('SELECT event_id, finding_ref, verdict, reason, user_id, hlc, supersedes, created_at FROM review_events WHERE finding_ref = ? AND head = 1 ORDER BY hlc, event_id', [findingRef])) as ReviewEventRow[];
}

/**
 * Appends an event: it is a head unless an event here already saw it (it arrived late), and the
 * events it saw stop being heads.
 */
export async function insertReviewEvent(db: Database, e: ReviewEventRow): Promise<void> {
  const seen = JSON.parse(e.supersedes) as string[];
  const seenLater = (await db.get('SELECT 1 AS one FROM review_supersedes WHERE superseded_id = ?', [e.event_id])) !== undefined;
  await db.run(`INSERT INTO review_events (event_id, finding_ref, verdict, reason, user_id, hlc, supersedes, created_at, head)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, [e.event_id, e.finding_ref, e.verdict, e.reason, e.user_id, e.hlc, e.supersedes, e.created_at, seenLater ? 0 : 1]);
  for (const id of seen) {
    await db.run('INSERT INTO review_supersedes (superseded_id, event_id) VALUES (?, ?) ON CONFLICT DO NOTHING', [id, e.event_id]);
    await db.run('UPDATE review_events SET head = 0 WHERE event_id = ? AND head = 1', [id]);
  }
}

export async function setFindingDisputed(db: Database, findingRef: number, disputed: boolean): Promise<void> {
  await db.run('UPDATE findings SET review_disputed = ? WHERE id = ?', [disputed ? 1 : 0, findingRef]);
}
