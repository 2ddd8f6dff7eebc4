/**
 * The hub's change log (server/store/sync-log.ts, docs/sync.md) on both backends: a reader that
 * follows the log by its numbers never skips a change, even when the transaction that appended
 * first commits last; a change appended twice (a push repeated after a lost acknowledgement) is
 * logged once; the pull cursor reads back what it wrote and refuses anything else.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MiaError } from '#server/errors.ts';
import { inTransaction } from '#server/store/database.ts';
import { appendChanges, readChangesAfter, type ChangeInput, type ChangeRow } from '#server/store/sync-log.ts';
import { decodeCursor, encodeCursor } from '#server/sync/cursor.ts';
import { UUID7_PATTERN, uuid7 } from '#server/sync/uuid7.ts';
import { onPostgres, startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

const AT = '2026-11-25T10:00:00.000Z';
let n = 0;

function change(entity: string): ChangeInput {
  n += 1;
  return {
    changeId: uuid7(Date.parse(AT) + n),
    deviceId: '0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b',
    entity,
    entityKey: `key-${n}`,
    op: 'upsert',
    hlc: `${String(Date.parse(AT)).padStart(15, '0')}-${n.toString(16).padStart(4, '0')}-dev`,
    userId: 'usr_1',
    payload: JSON.stringify({ n }),
  };
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Follows the log as a workstation would: from its cursor, until nothing more is there. */
async function pullAll(after: number): Promise<{ rows: ChangeRow[]; cursor: number }> {
  const rows: ChangeRow[] = [];
  let cursor = after;
  for (;;) {
    const page = await readChangesAfter(t.server.services.db, cursor, 2);
    if (page.length === 0) return { rows, cursor };
    rows.push(...page);
    cursor = page.at(-1)!.seq;
  }
}

describe('sync change log', () => {
  it('numbers changes in commit order, so a reader following the numbers misses none', async () => {
    const db = t.server.services.db;
    const start = (await pullAll(0)).cursor;
    const firstAppended = deferred();
    const releaseFirst = deferred();
    const slow = change('review');
    const quick = change('report');
    // The first transaction appends, then stays open; the second appends and commits meanwhile.
    const first = inTransaction(db, async (tx) => {
      await appendChanges(tx, [slow], AT);
      firstAppended.resolve();
      await releaseFirst.promise;
    });
    await firstAppended.promise;
    let secondDone = false;
    const second = inTransaction(db, async (tx) => appendChanges(tx, [quick], AT)).then((seqs) => {
      secondDone = true;
      return seqs;
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    // The second waits for the first (the log's lock on PostgreSQL, the one writer on SQLite).
    expect(secondDone).toBe(false);
    let seen: ChangeRow[] = [];
    if (onPostgres()) {
      // A reader now sees neither: nothing it could move past is missing below it.
      seen = (await pullAll(start)).rows;
      expect(seen).toEqual([]);
    }
    releaseFirst.resolve();
    await first;
    const [quickSeq] = await second;
    const rest = await pullAll(start);
    seen = [...seen, ...rest.rows];
    expect(seen.map((row) => row.change_id)).toEqual([slow.changeId, quick.changeId]);
    expect(seen[0]!.seq).toBeLessThan(quickSeq!);
  });

  it('logs a change once when the same change is pushed again', async () => {
    const db = t.server.services.db;
    const start = (await pullAll(0)).cursor;
    const again = change('verdict');
    const [firstSeq] = await inTransaction(db, async (tx) => appendChanges(tx, [again], AT));
    const [secondSeq] = await inTransaction(db, async (tx) => appendChanges(tx, [again, change('verdict')], AT));
    expect(firstSeq).toBeGreaterThan(start);
    expect(secondSeq).toBeNull();
    const rows = (await pullAll(start)).rows;
    expect(rows.filter((row) => row.change_id === again.changeId)).toHaveLength(1);
    expect(rows).toHaveLength(2);
  });

  it('gives changes time-ordered UUIDv7 ids', () => {
    const a = uuid7(Date.parse(AT));
    const b = uuid7(Date.parse(AT) + 1);
    expect(a).toMatch(UUID7_PATTERN);
    expect(a < b).toBe(true);
    // The first 48 bits are the milliseconds they were made at.
    expect(Number.parseInt(a.replaceAll('-', '').slice(0, 12), 16)).toBe(Date.parse(AT));
  });

  it('reads back its cursor and refuses one it did not make', () => {
    expect(decodeCursor(encodeCursor(42))).toBe(42);
    expect(decodeCursor(undefined)).toBe(0);
    for (const bad of ['nonsense', encodeCursor(-1), Buffer.from('{"v":1,"seq":"7"}').toString('base64url')]) {
      expect(() => decodeCursor(bad)).toThrow(MiaError);
    }
    expect(() => decodeCursor(Buffer.from('{"v":2,"seq":7}').toString('base64url'))).toThrow(/another protocol version/);
  });
});
