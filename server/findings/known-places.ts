/**
 * Findings' places already worked out, per database, per series. Pages of results and the
 * worklist ask for the same findings again and again (a worklist refreshing, a reader paging back),
 * and each place costs the database a walk of its series' index (PLACED_INSTANCES: ~15-20 us a
 * finding at 150 slices, half of a 50-result page's CPU time with them, 2026-11-26).
 *
 * Kept while the series' instance count is the one its places were read at. Instance rows are
 * only ever added, never changed or removed, and a scan's count goes up in the transaction that
 * adds them (store/archive-index.ts), so an unchanged count means unchanged places. The count a
 * caller passes was read before the places are: places read later are as new or newer, and a
 * later count that differs drops them.
 */
import type { PixelSpacingSource } from '#common/pixel-spacing.ts';
import type { Database } from '#server/store/database.ts';

/** Where one slice is in its series: its number from 1, spacing and position (places.ts). */
export type SliceEntry = { slice: number; spacing: readonly [number, number] | null; source: PixelSpacingSource | null; position: number | null };

type KnownSeries = {
  instances: number;
  slices: number;
  /** By `${instance_uid}#${frame}`: every frame of each instance asked about. */
  entries: Map<string, SliceEntry>;
  /** Instances asked about, found or not (a finding on an image the series does not hold). */
  asked: Set<string>;
};

/**
 * At most this many instances and slices remembered per database (an Enhanced image's frames are
 * a slice each); the series used longest ago go first.
 */
const KEPT = 100_000;
/**
 * Over KEPT, the oldest series go until this many are left: one walk from the front of the Map
 * per 25,000 additions instead of one per addition. A Map walked from its front passes every
 * entry deleted since it last compacted, and an eviction order is mostly deletions at the front:
 * walking it on every addition cost 8.5 s for 333,334 series of 3 instances each (an export of a
 * million findings reads them all), 0.77 s with this low-water mark, mostly garbage collection.
 */
const KEPT_AFTER_EVICTION = 75_000;

type Memo = { series: Map<number, KnownSeries>; size: number };
const memos = new WeakMap<Database, Memo>();

const sizeOf = (series: KnownSeries): number => series.asked.size + series.entries.size;

function memoOf(db: Database): Memo {
  let memo = memos.get(db);
  if (!memo) memos.set(db, (memo = { series: new Map(), size: 0 }));
  return memo;
}

/** The series' remembered places if its count is still `instances` and every uid was asked about. */
export function knownSeries(db: Database, scanRef: number, instances: number, uids: readonly string[]): { entries: ReadonlyMap<string, SliceEntry>; slices: number } | undefined {
  const memo = memoOf(db);
  const known = memo.series.get(scanRef);
  if (!known || known.instances !== instances || !uids.every((uid) => known.asked.has(uid))) return undefined;
  // Used now: moved to the back of the eviction order.
  memo.series.delete(scanRef);
  memo.series.set(scanRef, known);
  return known;
}

/**
 * Remembers places read at `instances`: the entries of the uids asked about, and the series'
 * slice count (undefined when none of them is in the series).
 */
export function rememberSeries(db: Database, scanRef: number, instances: number, slices: number | undefined, uids: readonly string[], entries: ReadonlyMap<string, SliceEntry>): void {
  const memo = memoOf(db);
  let known = memo.series.get(scanRef);
  if (known && known.instances !== instances) {
    memo.size -= sizeOf(known);
    memo.series.delete(scanRef);
    known = undefined;
  }
  if (!known) known = { instances, slices: 0, entries: new Map(), asked: new Set() };
  if (slices !== undefined) known.slices = slices;
  // Used now: at the back of the eviction order.
  memo.series.delete(scanRef);
  memo.series.set(scanRef, known);
  memo.size -= sizeOf(known);
  for (const uid of uids) known.asked.add(uid);
  for (const [key, entry] of entries) known.entries.set(key, entry);
  memo.size += sizeOf(known);
  if (memo.size <= KEPT) return;
  for (const [ref, series] of memo.series) {
    if (memo.size <= KEPT_AFTER_EVICTION) break;
    memo.size -= sizeOf(series);
    memo.series.delete(ref);
  }
}
