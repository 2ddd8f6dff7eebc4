/**
 * Where a finding is in the reader's terms (issue 11): its slice number in the viewer's stack,
 * its position along the slice normal and its box's size in millimetres, from the pixel spacing
 * of its own frame (Enhanced images keep spacing per frame in functional groups, PS3.3 C.7.6.16).
 * Reports state sizes in mm with a slice; a box in pixels means nothing to a referrer.
 */
import type { FindingPlace } from '#server/api/schemas.ts';
import type { Database } from '#server/store/database.ts';
import { decodeSpacing, findPlacedInstances, type InstanceRow } from '#server/store/instances.ts';
import { isNumber, isNumberPair, isRecord, orNull, parsedAs } from '#server/store/stored-json.ts';
import { knownSeries, rememberSeries, type SliceEntry } from '#server/findings/known-places.ts';

/** The slices of a series by `${instance_uid}#${frame}`, numbered from 1, and how many there are. */
export type SliceIndex = { entries: ReadonlyMap<string, SliceEntry>; slices: number };

/** What a slice's place reads of an Enhanced image's frame values (the API's frame_values, import-schemas.ts). */
type FramePlace = { position: number | null; pixel_spacing: [number, number] | null };

const isPosition = orNull(isNumber);
const isFrameSpacing = orNull(isNumberPair);

const isFramePlace = (value: unknown): value is FramePlace => isRecord(value) && isPosition(value['position']) && isFrameSpacing(value['pixel_spacing']);

const isFramePlaces = (value: unknown): value is FramePlace[] => Array.isArray(value) && value.every(isFramePlace);

const isSpacing = (value: [number, number] | null): value is [number, number] => value !== null && value[0] > 0 && value[1] > 0;

/** No places: a series whose findings' instances are not stored. */
export const NO_SLICES: SliceIndex = { entries: new Map(), slices: 0 };

/**
 * Enters an instance's frames as the slices after `before`, numbered as the viewer's stack does
 * (renderer/src/imaging/stack.ts): instances in the server's slice order, and within an Enhanced
 * image its frames by their own positions when every frame has one, so "slice 3" on the report
 * is slice 3 on screen. Returns the last one's number.
 */
function addEntries(entries: Map<string, SliceEntry>, row: Pick<InstanceRow, 'sop_instance_uid' | 'frames' | 'position' | 'pixel_spacing' | 'frame_values'>, before: number): number {
  const values = row.frame_values ? parsedAs(row.frame_values, isFramePlaces) : null;
  const { spacing: stored, source } = decodeSpacing(row.pixel_spacing);
  const shared = isSpacing(stored) ? stored : null;
  const frames = Array.from({ length: Math.max(1, row.frames) }, (_, frame) => frame);
  const ordered = values && values.length === frames.length && values.every((v) => v.position !== null);
  if (ordered) frames.sort((a, b) => (values[a]?.position ?? 0) - (values[b]?.position ?? 0));
  let slice = before;
  for (const frame of frames) {
    slice += 1;
    const own = values?.[frame];
    entries.set(`${row.sop_instance_uid}#${frame}`, {
      slice,
      spacing: own?.pixel_spacing ?? shared,
      source,
      position: own?.position ?? row.position,
    });
  }
  return slice;
}

/** A finding's image whose place is wanted; with its series' instance count when the caller read it. */
export type PlaceWanted = { scanRef: number; instanceUid: string; instanceCount?: number | undefined };

/**
 * The places of the given instances in their series, as slice indexes holding only their
 * entries (each numbered as in the whole series' index): what a page of findings needs, without
 * reading every instance of every series on it. Places of series whose instance count is given
 * are remembered while it holds (known-places.ts).
 */
export async function loadSlicePlaces(db: Database, wanted: readonly PlaceWanted[]): Promise<Map<number, SliceIndex>> {
  const bySeries = new Map<number, { uids: Set<string>; count: number | undefined }>();
  for (const w of wanted) {
    const series = bySeries.get(w.scanRef);
    if (series) series.uids.add(w.instanceUid);
    else bySeries.set(w.scanRef, { uids: new Set([w.instanceUid]), count: w.instanceCount });
  }
  const indexes = new Map<number, SliceIndex>();
  const missing: [number, { uids: Set<string>; count: number | undefined }][] = [];
  for (const [ref, series] of bySeries) {
    const known = series.count === undefined ? undefined : knownSeries(db, ref, series.count, [...series.uids]);
    if (known) indexes.set(ref, known);
    else missing.push([ref, series]);
  }
  if (missing.length === 0) return indexes;
  const read = new Map<number, { entries: Map<string, SliceEntry>; slices: number }>();
  const rows = await findPlacedInstances(db, missing.map(([ref]) => ref), missing.flatMap(([, series]) => [...series.uids]));
  for (const row of rows) {
    let index = read.get(row.scan_ref);
    if (!index) read.set(row.scan_ref, (index = { entries: new Map(), slices: row.slices }));
    addEntries(index.entries, row, row.before);
  }
  for (const [ref, { uids, count }] of missing) {
    const index = read.get(ref);
    if (index) indexes.set(ref, index);
    if (count !== undefined) rememberSeries(db, ref, count, index?.slices, [...uids], index?.entries ?? new Map());
  }
  return indexes;
}

/** The places in one series of the given instances (loadSlicePlaces), read now. */
export async function loadSliceIndex(db: Database, scanRef: number, instanceUids: readonly string[]): Promise<SliceIndex> {
  return (await loadSlicePlaces(db, instanceUids.map((instanceUid) => ({ scanRef, instanceUid })))).get(scanRef) ?? NO_SLICES;
}

const round1 = (mm: number): number => Math.round(mm * 10) / 10;

/** Null when the finding's image is not in the series (e.g. seeded or since deleted). */
export function placeOf(
  index: SliceIndex,
  finding: { instance_uid: string; frame: number; width: number; height: number },
  /** false for a finding about the whole image: its "box" is the frame, no size of anything. */
  sized = true,
): FindingPlace | null {
  const entry = index.entries.get(`${finding.instance_uid}#${finding.frame}`);
  if (!entry) return null;
  // Pixel Spacing is [row spacing (between rows, vertical), column spacing (horizontal)], PS3.3 10.7.1.3.
  const [rowMm, columnMm] = entry.spacing ?? [null, null];
  return {
    slice: entry.slice,
    slices: index.slices,
    position_mm: entry.position === null ? null : round1(entry.position),
    width_mm: columnMm === null || !sized ? null : round1(finding.width * columnMm),
    height_mm: rowMm === null || !sized ? null : round1(finding.height * rowMm),
    // Sizes from a radiograph's Imager Pixel Spacing are at the detector (common/pixel-spacing.ts).
    ...(entry.source !== null && entry.spacing !== null ? { spacing_source: entry.source } : {}),
  };
}
