/**
 * STOW-RS (PS3.18 10.5): a multipart/related body of application/dicom parts goes through the
 * same upload pipeline as POST /v1/instances (spooled to disk, parsed, reject rules, archive,
 * index), and the answer is the standard Store Instances Response (PS3.18 10.5.3, Table
 * 10.5.3-1): the stored instances with their Retrieve URL, the failed ones with a failure reason.
 */
import { readFile } from 'node:fs/promises';
import { readDicom } from '#server/dicom/parse.ts';
import { RETRIEVE_URL } from '#server/dicomweb/attributes.ts';
import type { DicomJson } from '#server/dicomweb/qido.ts';
import type { ImportDeps } from '#server/imports/imports.ts';
import { receiveUpload, type ReceivedUpload } from '#server/imports/upload.ts';
import type { ReceivedPart } from '#server/imports/multipart.ts';
import { MiaError } from '#server/errors.ts';
import { findInstancePlace } from '#server/store/dicomweb-index.ts';
import type { Readable } from 'node:stream';

const REFERENCED_SOP_CLASS = '00081150';
const REFERENCED_SOP_INSTANCE = '00081155';
const FAILURE_REASON = '00081197';
const FAILED_SOP_SEQUENCE = '00081198';
const REFERENCED_SOP_SEQUENCE = '00081199';

/** Failure reasons (PS3.18 Table 10.5.3-2 and the C-STORE statuses of PS3.4 Annex B it reuses). */
export const FAILURE = {
  /** Refused: out of resources. */
  outOfResources: 0xa700,
  /** Error: cannot understand (not DICOM, truncated, malformed). */
  cannotUnderstand: 0xc000,
  /** Refused: SOP class not supported (mia archives images: no pixel data, no storage here). */
  sopClassNotSupported: 0x0122,
  /** Transfer syntax not supported (no decoder for it). */
  transferSyntaxNotSupported: 0xc122,
  /** The SOP Instance UID is stored with different content: the first copy is kept (PS3.4 duplicate). */
  duplicateConflict: 0x0111,
  /** The instance belongs to another study than the one the request's path names. */
  studyMismatch: 0xc409,
} as const;

export type StowResult = { status: 200 | 202 | 409; body: DicomJson; patientIds: string[]; jobId: string | null };

function failureOf(reason: string): number {
  if (reason.startsWith('unsupported transfer syntax')) return FAILURE.transferSyntaxNotSupported;
  if (reason.startsWith('no pixel data')) return FAILURE.sopClassNotSupported;
  return FAILURE.cannotUnderstand;
}

type Item = { sopClassUid: string | null; sopInstanceUid: string | null };
type Failed = Item & { reason: number };
type Stored = Item & { retrieveUrl: string };

function referenceItem(item: Item): DicomJson {
  const out: DicomJson = {};
  out[REFERENCED_SOP_CLASS] = item.sopClassUid ? { vr: 'UI', Value: [item.sopClassUid] } : { vr: 'UI' };
  out[REFERENCED_SOP_INSTANCE] = item.sopInstanceUid ? { vr: 'UI', Value: [item.sopInstanceUid] } : { vr: 'UI' };
  return out;
}

/** The parts of another study than `studyUid` (STOW to /studies/{study}), read before importing. */
async function partsOfOtherStudies(parts: readonly ReceivedPart[], studyUid: string): Promise<Map<number, Item>> {
  const others = new Map<number, Item>();
  for (const part of parts) {
    const parsed = await readDicom(new Uint8Array(await readFile(part.file)));
    // Unparseable parts are left to the import, which names why.
    if (parsed.ok && parsed.instance.studyInstanceUid !== studyUid) {
      others.set(part.index, { sopClassUid: parsed.instance.sopClassUid, sopInstanceUid: parsed.instance.sopInstanceUid });
    }
  }
  return others;
}

export async function storeStudies(
  services: ImportDeps,
  body: { contentType: string; stream: Readable; maxBytes: number },
  createdBy: string,
  studyUid: string | undefined,
  base: string,
): Promise<StowResult> {
  const mediaType = body.contentType.split(';')[0]?.trim().toLowerCase();
  if (mediaType !== 'multipart/related') {
    throw new MiaError('unsupported_media_type', 'STOW-RS takes multipart/related bodies', 'Content-Type: multipart/related; type="application/dicom"; boundary=...');
  }
  const upload: ReceivedUpload = await receiveUpload(services.dataDir, body, services.config.httpLimits.maxUploadParts);
  const failed: Failed[] = [];
  const stored: Stored[] = [];
  let kept = upload.parts;
  if (studyUid !== undefined) {
    // The import removes what was spooled; until it has the upload, a failure here must.
    const others = await partsOfOtherStudies(upload.parts, studyUid).catch(async (err: unknown) => {
      await upload.discard();
      throw err;
    });
    for (const item of others.values()) failed.push({ ...item, reason: FAILURE.studyMismatch });
    kept = upload.parts.filter((p) => !others.has(p.index));
  }
  const { job, outcomes } = await services.imports.importUpload({ ...upload, parts: kept }, createdBy);
  const patientIds = new Set<string>();
  for (const o of outcomes) {
    if (o.outcome === 'imported' || o.outcome === 'duplicate') {
      const place = await findInstancePlace(services.db, o.sop_instance_uid);
      if (!place) {
        failed.push({ sopClassUid: null, sopInstanceUid: o.sop_instance_uid, reason: FAILURE.outOfResources });
        continue;
      }
      patientIds.add(place.patient_id);
      stored.push({
        sopClassUid: place.sop_class_uid,
        sopInstanceUid: o.sop_instance_uid,
        retrieveUrl: `${base}/studies/${place.study_uid}/series/${place.series_uid}/instances/${o.sop_instance_uid}`,
      });
    } else if (o.outcome === 'conflict') {
      failed.push({ sopClassUid: null, sopInstanceUid: o.sop_instance_uid, reason: FAILURE.duplicateConflict });
    } else {
      failed.push({ sopClassUid: null, sopInstanceUid: null, reason: failureOf(o.reason) });
    }
  }
  const response: DicomJson = {};
  if (studyUid !== undefined) response[RETRIEVE_URL] = { vr: 'UR', Value: [`${base}/studies/${studyUid}`] };
  if (failed.length > 0) {
    response[FAILED_SOP_SEQUENCE] = { vr: 'SQ', Value: failed.map((f) => ({ ...referenceItem(f), [FAILURE_REASON]: { vr: 'US', Value: [f.reason] } })) };
  }
  if (stored.length > 0) {
    response[REFERENCED_SOP_SEQUENCE] = { vr: 'SQ', Value: stored.map((s) => ({ ...referenceItem(s), [RETRIEVE_URL]: { vr: 'UR', Value: [s.retrieveUrl] } })) };
  }
  // PS3.18 10.5.3.1: 200 all stored, 202 some failed (warning), 409 none stored.
  const status = failed.length === 0 ? 200 : stored.length > 0 ? 202 : 409;
  return { status, body: response, patientIds: [...patientIds], jobId: job.public_id };
}

