/**
 * WADO-RS (PS3.18 10.4): stored files as they are (multipart/related; type="application/dicom"),
 * their metadata as DICOM JSON, frames and rendered frames. Files leave the content-addressed
 * archive byte for byte: mia does not transcode, so a transfer syntax other than the stored one
 * is 406 naming what is stored.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { datasetBytes } from '#server/dicom/parse.ts';
import { frameBytes } from '#server/dicom/frame-fragments.ts';
import { decodeFrame } from '#server/dicom/pixels.ts';
import { findTransferSyntax, type PixelEncoding } from '#server/dicom/transfer-syntax.ts';
import { instanceMetadata } from '#server/dicomweb/dicom-json.ts';
import { acceptedTypes, multipartBody, notAcceptable, type MultipartBody, type Part } from '#server/dicomweb/media.ts';
import type { DicomJson } from '#server/dicomweb/qido.ts';
import { MiaError } from '#server/errors.ts';
import { littleEndianBytes } from '#server/imaging/display.ts';
import { renderedFrame, storedFile, type ImageDeps } from '#server/imaging/images.ts';
import { findRetrievable, type RetrieveRow } from '#server/store/dicomweb-index.ts';
import type { Services } from '#server/services.ts';

export type RetrieveTarget = { studyUid: string; seriesUid?: string | undefined; sopInstanceUid?: string | undefined };

/** A WADO-RS request names at most this many frames; more is a 400, not a huge response. */
const MAX_FRAMES_PER_REQUEST = 4096;

async function rowsOf(services: Services, target: RetrieveTarget): Promise<RetrieveRow[]> {
  const rows = await findRetrievable(services.db, target);
  if (rows.length === 0) {
    const what = target.sopInstanceUid ? `instance ${target.sopInstanceUid}` : target.seriesUid ? `series ${target.seriesUid}` : `study ${target.studyUid}`;
    throw new MiaError('not_found', 'Not found', `no ${what} in this archive${target.seriesUid || target.sopInstanceUid ? ` under study ${target.studyUid}` : ''}`);
  }
  return rows;
}

export function patientsOf(rows: readonly RetrieveRow[]): string[] {
  return [...new Set(rows.map((r) => r.patient_id))];
}

/**
 * The transfer syntax the client accepts for application/dicom parts: '*' (as stored, also what
 * no parameter means here, since mia never transcodes) or a UID every file must already be in.
 */
function dicomTransferSyntax(accept: string | undefined): string {
  const ranges = acceptedTypes(accept);
  if (ranges.length === 0) return '*';
  for (const r of ranges) {
    const wildcard = r.mediaType === '*/*' || r.mediaType === 'multipart/*';
    const dicomPart = r.mediaType === 'multipart/related' && (r.partType === null || r.partType === 'application/dicom');
    if (wildcard || dicomPart) return r.transferSyntax ?? '*';
  }
  throw notAcceptable('WADO-RS instances are sent as multipart/related; type="application/dicom"', 'Accept: multipart/related; type="application/dicom"; transfer-syntax=*');
}

export async function retrieveInstances(services: Services, target: RetrieveTarget, accept: string | undefined): Promise<{ body: MultipartBody; patientIds: string[] }> {
  const syntax = dicomTransferSyntax(accept);
  const rows = await rowsOf(services, target);
  if (syntax !== '*') {
    const other = rows.find((r) => r.transfer_syntax !== syntax);
    if (other) {
      throw notAcceptable(
        'mia sends stored files as they are and does not transcode',
        `transfer-syntax=${syntax.slice(0, 64)} asked; instance ${other.sop_instance_uid} is stored as ${other.transfer_syntax}; ask for transfer-syntax=*`,
      );
    }
  }
  async function* parts(): AsyncGenerator<Part> {
    for (const row of rows) {
      yield { contentType: `application/dicom; transfer-syntax=${row.transfer_syntax}`, file: join(services.dataDir, row.file_path) };
    }
  }
  return { body: multipartBody('application/dicom', parts()), patientIds: patientsOf(rows) };
}

/** Metadata of each instance, in the order WADO-RS lists them; `base` is the DICOMweb root URL. */
export async function retrieveMetadata(services: Services, target: RetrieveTarget, base: string): Promise<{ items: DicomJson[]; patientIds: string[] }> {
  const rows = await rowsOf(services, target);
  const items: DicomJson[] = [];
  for (const row of rows) {
    const instanceUrl = `${base}/studies/${row.study_uid}/series/${row.series_uid}/instances/${row.sop_instance_uid}`;
    const frames = Array.from({ length: Math.min(row.frames, MAX_FRAMES_PER_REQUEST) }, (_, i) => i + 1).join(',');
    const result = instanceMetadata(new Uint8Array(await readFile(join(services.dataDir, row.file_path))), (tag) => (tag === '7FE00010' ? `${instanceUrl}/frames/${frames}` : null));
    if (!result.ok) throw new MiaError('unprocessable', 'Stored file no longer parses', `instance ${row.sop_instance_uid}: ${result.reason}`);
    items.push(result.json);
  }
  return { items, patientIds: patientsOf(rows) };
}

/**
 * Frame numbers of a WADO-RS frame list ("1,3,5"), which count from 1 (PS3.18 10.4.1.1.5). Each
 * at most once: a list repeating one frame 4,096 times made a 2 GB answer of one image, decoded
 * 4,096 times.
 */
export function parseFrameList(list: string, frames: number): number[] {
  const numbers = list.split(',');
  if (numbers.length > MAX_FRAMES_PER_REQUEST) throw new MiaError('invalid', 'Too many frames asked', `frames: at most ${MAX_FRAMES_PER_REQUEST} per request`);
  const seen = new Set<number>();
  return numbers.map((n) => {
    if (!/^\d{1,9}$/.test(n.trim())) throw new MiaError('invalid', 'Invalid frame list', `frames: expected numbers from 1, comma-separated, got '${n.slice(0, 20)}'`);
    const frame = Number(n.trim());
    if (frame < 1 || frame > frames) throw new MiaError('not_found', 'Frame not found', `frames: this instance has frames 1 to ${frames}`);
    if (seen.has(frame)) throw new MiaError('invalid', 'Invalid frame list', `frames: frame ${frame} is listed twice`);
    seen.add(frame);
    return frame;
  });
}

/** Media types of compressed frames (PS3.18 Table 8.7.3-2). */
const FRAME_MEDIA: Partial<Record<PixelEncoding, string>> = {
  'jpeg-baseline': 'image/jpeg',
  'jpeg-extended': 'image/jpeg',
  'jpeg-lossless': 'image/jpeg',
  'jpeg-ls': 'image/jls',
  'jpeg-2000': 'image/jp2',
  htj2k: 'image/jphc',
  rle: 'image/dicom-rle',
};

/**
 * Frames as multipart/related. Native data goes as application/octet-stream of little-endian
 * samples (uncompressed, PS3.18 8.7.3.3.2). Compressed data goes as stored, with its own media
 * type, when the client accepts that media type or transfer-syntax=*; otherwise it is decoded
 * and sent native.
 */
export async function retrieveFrames(
  services: ImageDeps,
  target: Required<Pick<RetrieveTarget, 'studyUid' | 'seriesUid' | 'sopInstanceUid'>>,
  frameList: string,
  accept: string | undefined,
): Promise<{ body: MultipartBody; patientIds: string[] }> {
  const [row] = await rowsOf(services, target);
  if (!row) throw new MiaError('internal', 'retrievable row vanished');
  const frames = parseFrameList(frameList, row.frames);
  const syntax = findTransferSyntax(row.transfer_syntax);
  const compressedType = syntax ? FRAME_MEDIA[syntax.encoding] : undefined;
  const ranges = acceptedTypes(accept);
  const wantsCompressed =
    compressedType !== undefined &&
    ranges.some((r) => r.mediaType === 'multipart/related' && (r.partType === compressedType || (r.partType !== 'application/octet-stream' && r.transferSyntax === '*') || r.transferSyntax === row.transfer_syntax));
  const wantsNative = ranges.length === 0 || ranges.some((r) => r.mediaType === '*/*' || (r.mediaType === 'multipart/related' && (r.partType === null || r.partType === 'application/octet-stream')));
  if (!wantsCompressed && !wantsNative) {
    throw notAcceptable('Frames are sent as multipart/related of application/octet-stream, or of their compressed media type', `stored as ${row.transfer_syntax}${compressedType ? ` (${compressedType})` : ''}`);
  }
  // Shared with the other frame requests of this file (a viewer asks for each frame apart).
  const { bytes, instance } = await storedFile(services, row);
  const base = `/dicom-web/studies/${row.study_uid}/series/${row.series_uid}/instances/${row.sop_instance_uid}/frames`;
  const part = async (frame: number): Promise<Part> => {
    const px = instance.pixelData;
    if (wantsCompressed && px?.encapsulated && compressedType) {
      return { contentType: `${compressedType}; transfer-syntax=${row.transfer_syntax}`, location: `${base}/${frame}`, body: frameBytes(datasetBytes(bytes, instance), px, frame - 1, instance.numberOfFrames) };
    }
    let decoded;
    try {
      decoded = await decodeFrame(bytes, instance, frame - 1);
    } catch (err) {
      throw new MiaError('unprocessable', `Frame ${frame} does not decode`, err instanceof Error ? err.message.slice(0, 300) : 'decoder failure');
    }
    return { contentType: 'application/octet-stream; transfer-syntax=1.2.840.10008.1.2.1', location: `${base}/${frame}`, body: littleEndianBytes(decoded).body };
  };
  // The first part is made before the answer starts, so a frame that does not decode is a 422
  // with its reason; made inside the stream, it cut the connection before any status line.
  const first = await part(frames[0] as number);
  async function* parts(): AsyncGenerator<Part> {
    yield first;
    for (const frame of frames.slice(1)) {
      // A turn between frames: decoding hundreds holds no other request for the whole answer.
      await nextTurn();
      yield await part(frame);
    }
  }
  const root = wantsCompressed && compressedType ? compressedType : 'application/octet-stream';
  return { body: multipartBody(root, parts()), patientIds: [row.patient_id] };
}

/** A rendered frame (PS3.18 10.4.1.1.3): PNG, windowed as the viewer's PNG frames are. */
export async function retrieveRendered(
  services: ImageDeps,
  target: Required<Pick<RetrieveTarget, 'studyUid' | 'seriesUid' | 'sopInstanceUid'>>,
  frame: number,
  window: { center: number; width: number } | undefined,
): Promise<{ png: Uint8Array; patientId: string }> {
  const [row] = await rowsOf(services, target);
  if (!row) throw new MiaError('internal', 'retrievable row vanished');
  if (frame < 1 || frame > row.frames) throw new MiaError('not_found', 'Frame not found', `this instance has frames 1 to ${row.frames}`);
  return await renderedFrame(services, row.sop_instance_uid, frame - 1, window);
}
