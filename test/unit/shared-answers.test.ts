/**
 * What SharedAnswers keeps, for how long and within what limits (server/http/shared-answers.ts),
 * over a real SQLite store whose writes move its read version.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { HandlerContext, HandlerResult } from '#server/http/route.ts';
import { callerBlind, keptText, SharedAnswers } from '#server/http/shared-answers.ts';
import { openDatabase, type SqliteDatabase } from '#server/store/sqlite.ts';
import { seedScan } from '../helpers/seed.ts';

let dir: string;
let db: SqliteDatabase;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mia-shared-answers-'));
  db = openDatabase(dir);
});
afterEach(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

const page = (n: number): HandlerResult => ({ kind: 'list', items: Array.from({ length: n }, (_, i) => ({ i })), nextAfterId: null });

function keepPage(answers: SharedAnswers, key: string, n = 1): HandlerResult {
  const sharing = answers.sharing('/v1/x', [key]);
  if (!sharing) throw new Error('SQLite always has a read version');
  const result = page(n);
  answers.keep(sharing, result, { target: key });
  return result;
}

const lookup = (answers: SharedAnswers, key: string): HandlerResult | undefined => {
  const sharing = answers.sharing('/v1/x', [key]);
  return sharing ? answers.get(sharing)?.result : undefined;
};

describe('SharedAnswers', () => {
  it('gives a kept answer and its note while the store is unchanged, and none after a write', async () => {
    const answers = new SharedAnswers(db);
    const kept = keepPage(answers, 'a');
    const sharing = answers.sharing('/v1/x', ['a']);
    expect(sharing && answers.get(sharing)).toMatchObject({ result: kept, note: { target: 'a' } });
    await seedScan(db);
    expect(lookup(answers, 'a')).toBeUndefined();
    // Ended, not just hidden: its text is no longer kept either.
    expect(keptText(kept, 'json', () => 'x')).toBeNull();
  });

  it('keeps nothing computed across a write', async () => {
    const answers = new SharedAnswers(db);
    const sharing = answers.sharing('/v1/x', ['a']);
    await seedScan(db);
    if (sharing) answers.keep(sharing, page(1), {});
    expect(lookup(answers, 'a')).toBeUndefined();
  });

  it('lets requests that ask together wait for one computation, but not one that asked after a write', async () => {
    const answers = new SharedAnswers(db);
    const first = answers.sharing('/v1/x', ['a']);
    if (!first) throw new Error('SQLite always has a read version');
    expect(answers.joining(first)).toBeUndefined();
    const settle = answers.computing(first);
    const together = answers.sharing('/v1/x', ['a']);
    const joined = together && answers.joining(together);
    expect(joined).toBeInstanceOf(Promise);
    // Another page is its own computation.
    expect(answers.joining(answers.sharing('/v1/x', ['b'])!)).toBeUndefined();
    await seedScan(db);
    const afterWrite = answers.sharing('/v1/x', ['a']);
    expect(afterWrite && answers.joining(afterWrite)).toBeUndefined();
    const result = page(3);
    settle({ result, note: { target: 'a' } });
    expect(await joined).toEqual({ result, note: { target: 'a' } });
    // Done: nothing under way to join any more.
    expect(together && answers.joining(together)).toBeUndefined();
  });

  it('gives those who joined nothing when the computation failed, so each computes its own', async () => {
    const answers = new SharedAnswers(db);
    const sharing = answers.sharing('/v1/x', ['a'])!;
    const settle = answers.computing(sharing);
    const joined = answers.joining(sharing);
    settle(undefined);
    expect(await joined).toBeUndefined();
    expect(answers.joining(sharing)).toBeUndefined();
  });

  it('keeps at most so many answers and items, the least recently used going first', () => {
    const answers = new SharedAnswers(db, { entries: 2, items: 10, bytes: 1 << 20 });
    const a = keepPage(answers, 'a');
    keepPage(answers, 'b');
    expect(lookup(answers, 'a')).toBe(a); // a is now the most recent
    keepPage(answers, 'c');
    expect(lookup(answers, 'b')).toBeUndefined();
    expect(lookup(answers, 'a')).toBe(a);
    keepPage(answers, 'd', 9); // 9 + 1 (a) + 1 (c) items > 10: the oldest goes
    expect(lookup(answers, 'c')).toBeUndefined();
    keepPage(answers, 'e', 11); // more items than all may hold: never kept
    expect(lookup(answers, 'e')).toBeUndefined();
  });

  it('counts the bytes written of each answer, and gives a too large one once without keeping it', () => {
    const answers = new SharedAnswers(db, { entries: 10, items: 100, bytes: 1000 });
    const a = keepPage(answers, 'a');
    expect(keptText(a, 'json', () => 'x'.repeat(200))?.byteLength).toBe(200);
    expect(keptText(a, 'json', () => 'never written again')?.toString()).toBe('x'.repeat(200));
    const b = keepPage(answers, 'b');
    expect(keptText(b, 'csv', () => 'y'.repeat(200))?.byteLength).toBe(200);
    const c = keepPage(answers, 'c');
    expect(keptText(c, 'xml', () => 'z'.repeat(200))?.byteLength).toBe(200);
    const d = keepPage(answers, 'd');
    expect(keptText(d, 'xml', () => 'w'.repeat(200))?.byteLength).toBe(200);
    const e = keepPage(answers, 'e');
    expect(keptText(e, 'xml', () => 'v'.repeat(200))?.byteLength).toBe(200);
    // 1,000 bytes kept, the budget: all five stay. Asking for a makes it the most recent.
    expect(lookup(answers, 'a')).toBe(a);
    const f = keepPage(answers, 'f');
    expect(keptText(f, 'json', () => 'u')?.byteLength).toBe(1);
    // 1,001 bytes: b, now the least recently used, goes.
    expect(lookup(answers, 'b')).toBeUndefined();
    expect(lookup(answers, 'a')).toBe(a);
    expect(lookup(answers, 'e')).toBe(e);
    const big = keepPage(answers, 'big');
    // Over a quarter of the budget: this request still gets its bytes, the answer is not kept.
    expect(keptText(big, 'xml', () => 'q'.repeat(300))?.byteLength).toBe(300);
    expect(lookup(answers, 'big')).toBeUndefined();
    expect(lookup(answers, 'f')).toBe(f);
  });
});

describe('callerBlind', () => {
  it("refuses a shared answer's handler the caller's identity and headers, and gives the rest", () => {
    const context = { params: { id: 1 }, query: { limit: 50 }, version: 'v1.1', auth: { userId: 'u' }, headers: {}, requestId: 'r' } as unknown as HandlerContext<unknown, unknown, unknown>;
    const blind = callerBlind(context, '/v1/x');
    expect(blind.query).toEqual({ limit: 50 });
    expect(blind.version).toBe('v1.1');
    expect(() => blind.auth).toThrow(/may not depend on its caller/);
    expect(() => blind.headers).toThrow(/may not depend on its caller/);
    expect(() => blind.requestId).toThrow();
  });
});
