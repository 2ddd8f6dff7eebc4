/**
 * Where a finding is in the reader's terms (issue 11): its slice number in the viewer's stack,
 * its position along the slice normal and its box's size in millimetres, from the pixel spacing
 * of its own frame (Enhanced images keep spacing per frame in functional groups, PS3.3 C.7.6.16).
 * Reports state sizes in mm with a slice; a box in pixels means nothing to a referrer.
 */
import type { PixelSpacingSource } from '#common/pixel-spacing.ts';
import type { FindingPlace } from '#server/api/schemas.ts';
import { frameValue } from '#server/api/import-schemas.ts';
import { z } from 'zod';
import type { Database } from '#server/store/database.ts';
import { decodeSpacing, listInstancesOfScans, type InstanceRow } from '#server/store/instances.ts';

type SliceEntry = { slice: number; spacing: readonly [number, number] | null; source: PixelSpacingSource | null; position: number | null };

/** The slices of a series by `${instance_uid}#${frame}`, numbered from 1, and how many there are. */
export type SliceIndex = { entries: ReadonlyMap<string, SliceEntry>; slices: number };

const frameValues = z.array(frameValue);
const spacing = z.tuple([z.number().positive(), z.number().positive()]);

/**
 * Numbers slices as the viewer's stack does (renderer/src/imaging/stack.ts): instances in the
 * server's slice order, and within an Enhanced image its frames by their own positions when
 * every frame has one, so "slice 3" on the report is slice 3 on screen.
 */
export function sliceIndexOf(rows: readonly InstanceRow[]): SliceIndex {
  const entries = new Map<string, SliceEntry>();
  let slice = 0;
  for (const row of rows) {
    const parsedValues = row.frame_values ? frameValues.safeParse(JSON.parse(row.frame_values)) : null;
    const values = parsedValues?.success ? parsedValues.data : null;
    const { spacing: stored, source } = decodeSpacing(row.pixel_spacing);
    const shared = stored && spacing.safeParse(stored).success ? stored : null;
    const frames = Array.from({ length: Math.max(1, row.frames) }, (_, frame) => frame);
    const ordered = values && values.length === frames.length && values.every((v) => v.position !== null);
    if (ordered) frames.sort((a, b) => (values[a]?.position ?? 0) - (values[b]?.position ?? 0));
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
  }
  return { entries, slices: slice };
}

export async function loadSliceIndex(db: Database, scanRef: number): Promise<SliceIndex> {
  return sliceIndexOf((await listInstancesOfScans(db, [scanRef])).get(scanRef) ?? []);
}

/** The slice indexes of many series with one query: a page of results on a hub would otherwise
 * wait for a database round trip per series. */
export async function loadSliceIndexes(db: Database, scanRefs: readonly number[]): Promise<Map<number, SliceIndex>> {
  const instances = await listInstancesOfScans(db, scanRefs);
  return new Map([...instances].map(([ref, rows]) => [ref, sliceIndexOf(rows)]));
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
