/**
 * Image access for viewers: a series' instances in slice order, one frame as a windowed PNG or
 * as raw stored values, and worklist thumbnails. Frames are decoded lazily from the archive and
 * kept in a byte-bounded cache per server.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { FrameValue, Instance } from '#server/api/import-schemas.ts';
import { frameValues, readDicom, type FrameValues } from '#server/dicom/parse.ts';
import { decodeFrame } from '#server/dicom/pixels.ts';
import { topLevelTags, type TagEntry } from '#server/dicom/tags.ts';
import type { DecodedFrame } from '#server/dicom/pixel-types.ts';
import { applyRescale, type Window } from '#server/dicom/modality.ts';
import { MiaError, notFound } from '#server/errors.ts';
import type { FrameCache } from '#server/imaging/frame-cache.ts';
import type { StoredFile } from '#server/imaging/stored-files.ts';
import { pixelAspect } from '#common/pixel-aspect.ts';
import type { MeasureFrame } from '#common/measure.ts';
import { defaultWindow, downscale, littleEndianBytes, resampleToAspect, toDisplay, type DisplaySettings } from '#server/imaging/display.ts';
import { encodePng } from '#server/imaging/png.ts';
import type { Services } from '#server/services.ts';
import { countScanInstances, decodeSpacing, findInstance, listScanInstances, type InstanceRow } from '#server/store/instances.ts';
import { findScan } from '#server/store/scans.ts';

export const THUMBNAIL_SIDE = 128;

/** Image reads use the runtime's frame cache (server/runtime.ts). */
export type ImageDeps = Services & { frames: FrameCache };

/**
 * Each decoded frame's own rescale and windows (Enhanced multi-frame images keep them per frame
 * in functional groups, PS3.3 C.7.6.16), kept beside the cached frame: a cache hit does not parse
 * the file again, and the index holds one value per instance.
 */
const valuesOfFrame = new WeakMap<DecodedFrame, FrameValues>();

function toInstance(row: InstanceRow): Instance {
  const { spacing, source } = decodeSpacing(row.pixel_spacing);
  return {
    instance_uid: row.sop_instance_uid,
    instance_number: row.instance_number,
    position: row.position,
    rows: row.rows,
    columns: row.columns,
    frames: row.frames,
    transfer_syntax: row.transfer_syntax,
    pixel_spacing: spacing,
    pixel_spacing_source: source,
    photometric: row.photometric,
    rescale_slope: row.rescale_slope,
    rescale_intercept: row.rescale_intercept,
    window_center: row.window_center,
    window_width: row.window_width,
    image_orientation: row.image_orientation ? (JSON.parse(row.image_orientation) as Orientation) : null,
    frame_values: row.frame_values ? (JSON.parse(row.frame_values) as FrameValue[]) : null,
    frames_problem: row.frames_problem,
  };
}

async function scanRefOf(services: ImageDeps, scanId: string): Promise<{ id: number; patientId: string }> {
  const scan = await findScan(services.db, scanId);
  if (!scan) throw notFound('Scan', scanId);
  return { id: scan.id, patientId: scan.patient_id };
}

/** Offsets page through the slice order (keyset ids would not follow it); the cursor is opaque. */
export async function listInstances(
  services: ImageDeps,
  scanId: string,
  page: { offset: number; limit: number },
): Promise<{ items: Instance[]; nextOffset: number | null; patientId: string }> {
  const scan = await scanRefOf(services, scanId);
  const rows = await listScanInstances(services.db, scan.id, page.offset, page.limit + 1);
  const items = rows.slice(0, page.limit).map(toInstance);
  return { items, nextOffset: rows.length > page.limit ? page.offset + page.limit : null, patientId: scan.patientId };
}

async function instanceRow(services: ImageDeps, instanceUid: string): Promise<InstanceRow> {
  const row = await findInstance(services.db, instanceUid);
  if (!row) throw notFound('Instance', instanceUid);
  return row;
}

/**
 * The top-level tags of an instance's stored file, for the tag browser. They include PHI
 * (names, birth date): the route is read:scans and audits the patient, as frame reads do.
 */
export async function instanceTags(services: ImageDeps, instanceUid: string): Promise<{ tags: TagEntry[]; patientId: string }> {
  const row = await instanceRow(services, instanceUid);
  const tags = topLevelTags(new Uint8Array(await readFile(join(services.dataDir, row.file_path))));
  if ('reason' in tags) throw new MiaError('unprocessable', 'Stored file no longer parses', tags.reason);
  return { tags, patientId: row.patient_id };
}

/** Six direction cosines, as stored (JSON) from Image Orientation (Patient). */
type Orientation = [number, number, number, number, number, number];

type LoadedFrame = { row: InstanceRow; frame: DecodedFrame; settings: DisplaySettings };

/** An instance's stored file, read and parsed: shared with the other frame requests of the moment (stored-files.ts). */
export async function storedFile(services: ImageDeps, row: { file_path: string; frames: number }): Promise<StoredFile> {
  return await services.frames.files.get(
    row.file_path,
    async () => {
      const bytes = new Uint8Array(await readFile(join(services.dataDir, row.file_path)));
      const result = await readDicom(bytes);
      if (!result.ok) throw new MiaError('unprocessable', 'Stored file no longer parses', result.reason);
      return { bytes, instance: result.instance };
    },
    row.frames > 1,
  );
}

async function loadFrame(services: ImageDeps, row: InstanceRow, frameIndex: number): Promise<LoadedFrame> {
  if (frameIndex >= row.frames) {
    throw new MiaError('not_found', 'Frame not found', `instance ${row.sop_instance_uid} has ${row.frames} frame(s), numbered from 0`);
  }
  const frame = await services.frames.get(`${row.sop_instance_uid}#${frameIndex}`, async () => {
    const { bytes, instance } = await storedFile(services, row);
    try {
      // Copied out of the file's bytes (the default): a kept frame must not hold its whole file.
      const decoded = await decodeFrame(bytes, instance, frameIndex);
      valuesOfFrame.set(decoded, frameValues(instance, frameIndex));
      return decoded;
    } catch (err) {
      throw new MiaError('unprocessable', 'Cannot decode this frame', err instanceof Error ? err.message : 'decoder failure');
    }
  });
  const own = valuesOfFrame.get(frame);
  const settings: DisplaySettings = own
    ? { modality: row.modality, ...own }
    : {
        // Not reached while frames are decoded only here; the index's values are the fallback.
        modality: row.modality,
        rescaleSlope: row.rescale_slope,
        rescaleIntercept: row.rescale_intercept,
        windowCenter: row.window_center !== null ? [row.window_center] : [],
        windowWidth: row.window_width !== null ? [row.window_width] : [],
      };
  return { row, frame, settings };
}

/**
 * One frame as a PNG. `physical`: resampled (bilinear) so its width:height is the image's size in
 * mm, for clients that show the PNG as is; by default the stored pixel grid, one PNG pixel per
 * image pixel, which pixel coordinates (boxes, measurements) and the viewer's pixel checks rely on.
 */
export async function renderedFrame(
  services: ImageDeps,
  instanceUid: string,
  frameIndex: number,
  window: Window | undefined,
  aspect: 'native' | 'physical' = 'native',
): Promise<{ png: Buffer; patientId: string }> {
  const row = await instanceRow(services, instanceUid);
  const { frame, settings } = await loadFrame(services, row, frameIndex);
  const drawn = toDisplay(frame, settings, window);
  const image = aspect === 'physical' ? resampleToAspect(drawn, pixelAspect(frameSpacing(row, frameIndex))) : drawn;
  return { png: encodePng(image.pixels, image.width, image.height, image.channels), patientId: row.patient_id };
}

export type RawFrame = { body: Uint8Array; headers: Record<string, string>; patientId: string };

export async function rawFrame(services: ImageDeps, instanceUid: string, frameIndex: number): Promise<RawFrame> {
  const row = await instanceRow(services, instanceUid);
  const { frame, settings } = await loadFrame(services, row, frameIndex);
  const { body, bitsAllocated } = littleEndianBytes(frame);
  const win = defaultWindow(frame, settings);
  return {
    body,
    patientId: row.patient_id,
    headers: {
      'X-Rows': String(frame.rows),
      'X-Columns': String(frame.columns),
      'X-Samples-Per-Pixel': String(frame.samplesPerPixel),
      'X-Bits-Allocated': String(bitsAllocated),
      'X-Pixel-Representation': String(frame.pixelRepresentation),
      'X-Rescale-Slope': String(settings.rescaleSlope),
      'X-Rescale-Intercept': String(settings.rescaleIntercept),
      'X-Window-Center': win ? String(win.center) : '',
      'X-Window-Width': win ? String(win.width) : '',
      'X-Photometric-Interpretation': frame.photometricInterpretation,
    },
  };
}

/**
 * The middle frame in space: an Enhanced image's frames follow their own positions, which frame
 * numbers need not (an interleaved acquisition stores even slices first).
 */
function middleFrame(frames: number, values: readonly FrameValue[] | null): number {
  const byIndex = Math.floor(frames / 2);
  if (!values || values.length !== frames || values.some((v) => v.position === null)) return byIndex;
  const order = values.map((v, i) => ({ i, position: v.position ?? 0 })).sort((a, b) => a.position - b.position);
  return order[byIndex]?.i ?? byIndex;
}

/** The middle slice (middle frame of a multi-frame image) with its default window, <= 128 px. */
export async function scanThumbnail(services: ImageDeps, scanId: string): Promise<{ png: Buffer; patientId: string }> {
  const scan = await scanRefOf(services, scanId);
  const count = await countScanInstances(services.db, scan.id);
  const [middle] = count === 0 ? [] : await listScanInstances(services.db, scan.id, Math.floor(count / 2), 1);
  if (!middle) throw new MiaError('not_found', 'This scan has no images yet', `scan ${scanId} has no stored instances`);
  const values = middle.frame_values ? (JSON.parse(middle.frame_values) as FrameValue[]) : null;
  const frameIndex = middleFrame(middle.frames, values);
  const { frame, settings } = await loadFrame(services, middle, frameIndex);
  const spacing = values?.[frameIndex]?.pixel_spacing ?? decodeSpacing(middle.pixel_spacing).spacing;
  const image = downscale(toDisplay(frame, settings, undefined), THUMBNAIL_SIDE, pixelAspect(spacing));
  return { png: encodePng(image.pixels, image.width, image.height, image.channels), patientId: scan.patientId };
}

/** A frame's own pixel spacing (functional groups), else the instance's. */
function frameSpacing(row: InstanceRow, frameIndex: number): [number, number] | null {
  const values = row.frame_values ? (JSON.parse(row.frame_values) as FrameValue[]) : null;
  return values?.[frameIndex]?.pixel_spacing ?? decodeSpacing(row.pixel_spacing).spacing;
}

/**
 * One frame in modality values (stored * the frame's own slope + intercept: HU on CT) with the
 * frame's own pixel spacing, for measurements the server computes itself (common/measure.ts)
 * rather than trusting a client's numbers.
 */
export async function modalityFrame(
  services: ImageDeps,
  row: InstanceRow,
  frameIndex: number,
): Promise<{ frame: MeasureFrame; spacing: readonly number[] | null }> {
  const { frame, settings } = await loadFrame(services, row, frameIndex);
  const spacing = frameSpacing(row, frameIndex);
  // The same rescale as rendering and analysis (applyRescale), so the numbers agree with the picture.
  const modality = frame.samplesPerPixel === 1 ? applyRescale(frame.pixels, settings.rescaleSlope, settings.rescaleIntercept) : new Int32Array(0);
  return { frame: { rows: frame.rows, columns: frame.columns, samplesPerPixel: frame.samplesPerPixel, values: modality }, spacing };
}
