/**
 * Findings' places kept per series (server/findings/known-places.ts): kept while the series'
 * instance count holds, per database, and bounded, the series used longest ago dropped first.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { knownSeries, rememberSeries, type SliceEntry } from '#server/findings/known-places.ts';
import { openDatabase, type SqliteDatabase } from '#server/store/sqlite.ts';

let dirs: string[] = [];
let a: SqliteDatabase;
let b: SqliteDatabase;
beforeAll(() => {
  dirs = [mkdtempSync(join(tmpdir(), 'mia-places-')), mkdtempSync(join(tmpdir(), 'mia-places-'))];
  [a, b] = dirs.map((dir) => openDatabase(dir)) as [SqliteDatabase, SqliteDatabase];
});
afterAll(async () => {
  await Promise.all([a.close(), b.close()]);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const entry = (slice: number): SliceEntry => ({ slice, spacing: [0.5, 0.5], source: 'pixel_spacing', position: slice * 2.5 });
const one = (uid: string, slice: number): Map<string, SliceEntry> => new Map([[`${uid}#0`, entry(slice)]]);

it('gives places back only at the instance count they were read at, and only for instances asked about', () => {
  rememberSeries(a, 1, 150, 150, ['u1', 'gone'], one('u1', 75));
  expect(knownSeries(a, 1, 150, ['u1', 'gone'])?.entries.get('u1#0')?.slice).toBe(75);
  expect(knownSeries(a, 1, 150, ['u2'])).toBeUndefined();
  // More of the series arrived: its places may all have moved.
  expect(knownSeries(a, 1, 151, ['u1'])).toBeUndefined();
  rememberSeries(a, 1, 151, 151, ['u1'], one('u1', 76));
  expect(knownSeries(a, 1, 151, ['u1'])?.entries.get('u1#0')?.slice).toBe(76);
  expect(knownSeries(a, 1, 150, ['u1'])).toBeUndefined();
  // Another database's series 1 is another series.
  expect(knownSeries(b, 1, 151, ['u1'])).toBeUndefined();
});

it('keeps at most 100,000 instances and slices, dropping the series used longest ago first down to 75,000', () => {
  // 60,000 series of one instance and one slice each: 120,000 in all, over the bound.
  for (let ref = 1; ref <= 60_000; ref += 1) {
    rememberSeries(b, ref, 1, 1, [`i${ref}`], one(`i${ref}`, 1));
    // Series 1 is looked at again and again, as a worklist's first rows are.
    if (ref % 1000 === 0) expect(knownSeries(b, 1, 1, ['i1'])).toBeDefined();
  }
  expect(knownSeries(b, 1, 1, ['i1'])).toBeDefined();
  expect(knownSeries(b, 2, 1, ['i2'])).toBeUndefined();
  expect(knownSeries(b, 60_000, 1, ['i60000'])).toBeDefined();
  let kept = 0;
  for (let ref = 1; ref <= 60_000; ref += 1) if (knownSeries(b, ref, 1, [`i${ref}`])) kept += 1;
  // Over the bound at series 50,001 (100,002): dropped to 37,500 series, then 9,999 more added.
  expect(kept).toBe(37_500 + 9_999);
});
