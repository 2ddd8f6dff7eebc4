/**
 * DICOMweb (PS3.18) under /dicom-web, where OHIF, Weasis and Orthanc's DICOMweb client look:
 * QIDO-RS searches, WADO-RS retrieval and STOW-RS storage, behind the same keys and scopes as
 * the /v1 reads (read:scans) and uploads (write:scans), audited with the patients reached.
 */
import { Readable } from 'node:stream';
import { z } from 'zod';
import { MiaError } from '#server/errors.ts';
import { defineRoute, scopes, type HandlerResult, type Route } from '#server/http/route.ts';
import { searchQido, type QidoScope } from '#server/dicomweb/qido.ts';
import { storeStudies } from '#server/dicomweb/stow.ts';
import { retrieveFrames, retrieveInstances, retrieveMetadata, retrieveRendered } from '#server/dicomweb/wado.ts';
import { UPLOAD_LIMIT_BYTES } from '#server/imports/upload.ts';
import type { QidoLevel } from '#server/store/dicomweb-index.ts';

export const DICOMWEB_BASE = '/dicom-web';

const DICOM_JSON = 'application/dicom+json';
const JSON_TYPES = [DICOM_JSON, 'application/json'];

const uid = z.string().regex(/^[0-9]+(\.[0-9]+)*$/, 'expected a DICOM UID').max(64);
const studyParams = z.object({ study: uid }).strict();
const seriesParams = z.object({ study: uid, series: uid }).strict();
const instanceParams = z.object({ study: uid, series: uid, instance: uid }).strict();
const framesParams = instanceParams.extend({ frames: z.string().min(1).max(40_000) }).strict();
const frameParams = instanceParams.extend({ frame: z.coerce.number().int().min(1).max(1_000_000) }).strict();
/** QIDO takes any attribute by keyword or tag: the domain checks each name and value (400 naming it). */
const qidoQuery = z.record(z.string(), z.union([z.string(), z.array(z.string())]));
const renderedQuery = z
  .object({
    // PS3.18 8.3.5.1.4: window=center,width,function (linear only here).
    window: z.string().regex(/^-?\d+(\.\d+)?,\d+(\.\d+)?(,linear)?$/i, 'expected center,width[,linear]').optional(),
    // PS3.18 8.3.5.1.2-3, checked so a malformed one is a 400 like any other parameter. PNG is
    // lossless, so quality changes nothing; the frame is sent at its own size whatever viewport asks.
    quality: z.string().regex(/^(100|[1-9][0-9]?)$/, 'expected an integer from 1 to 100').optional(),
    viewport: z.string().regex(/^\d{1,5},\d{1,5}(,-?\d{1,6}(\.\d+)?){0,4}$/, 'expected vw,vh[,sx,sy,sw,sh]').optional(),
  })
  .strict();

/** The absolute DICOMweb root as this request reached it, for Retrieve URLs. */
function baseOf(headers: Readonly<Record<string, string | undefined>>): string {
  // The Host header has passed the DNS-rebinding check (http/host-check.ts) by now.
  return `http://${headers['host'] ?? '127.0.0.1'}${DICOMWEB_BASE}`;
}

function dicomJson(data: unknown, warning: string | null = null): HandlerResult {
  return { kind: 'binary', contentType: DICOM_JSON, body: Buffer.from(JSON.stringify(data)), headers: warning ? { Warning: warning } : {} };
}

type QidoParams = { study?: string; series?: string };

function qidoRoute(path: string, level: QidoLevel, fromLevel: QidoLevel, params: z.ZodType<QidoParams> | undefined, summary: string): Route {
  return defineRoute({
    method: 'get',
    path: `${DICOMWEB_BASE}${path}`,
    summary,
    description:
      'QIDO-RS (PS3.18 10.6). Attributes by keyword or tag: PatientName (* and ?; fuzzymatching=true matches each word as the ' +
      'prefix of a name component, case and accents ignored), PatientID, StudyInstanceUID (comma-separated list), ' +
      'AccessionNumber, StudyDate (20200101-20201231, open ranges), ModalitiesInStudy, Modality, SeriesInstanceUID, ' +
      'SOPInstanceUID... includefield (or all), limit (at most 1000: a Warning header says when results were cut) and offset. ' +
      'An unknown attribute or a bad value is 400 naming it.',
    access: scopes('read:scans'),
    ...(params ? { params } : {}),
    query: qidoQuery,
    produces: JSON_TYPES,
    audit: 'dicomweb.search',
    handle: async ({ services, params: p, query, headers, audit }) => {
      const path = (p ?? {}) as QidoParams;
      const scope: QidoScope = { level, studyUid: path.study, seriesUid: path.series };
      audit({ target: `dicomweb:${level}${path.study ? `:${path.study}` : ''}` });
      const result = await searchQido(services, query, scope, fromLevel, baseOf(headers));
      audit({ patientIds: result.patientIds });
      return dicomJson(result.items, result.warning);
    },
  });
}

function retrieveRoute(path: string, params: z.ZodType<QidoParams & { instance?: string }>, summary: string): Route {
  return defineRoute({
    method: 'get',
    path: `${DICOMWEB_BASE}${path}`,
    summary,
    description:
      'WADO-RS (PS3.18 10.4): the stored files, byte for byte, as multipart/related; type="application/dicom". mia does not ' +
      'transcode: transfer-syntax=* (or none) sends each file as stored; another transfer syntax is 406 unless every file is stored in it.',
    access: scopes('read:scans'),
    params,
    produces: 'multipart/related',
    audit: 'dicomweb.retrieve',
    handle: async ({ services, params: p, headers, audit }) => {
      const target = { studyUid: p.study ?? '', seriesUid: p.series, sopInstanceUid: p.instance };
      audit({ target: `study:${target.studyUid}` });
      const { body, patientIds } = await retrieveInstances(services, target, headers['accept']);
      audit({ patientIds });
      return { kind: 'stream', contentType: body.contentType, body: body.body };
    },
  });
}

function metadataRoute(path: string, params: z.ZodType<QidoParams & { instance?: string }>, summary: string): Route {
  return defineRoute({
    method: 'get',
    path: `${DICOMWEB_BASE}${path}/metadata`,
    summary,
    description:
      'WADO-RS metadata (PS3.18 10.4.1.1.2): each instance as DICOM JSON (F.2), every element but bulk data, which is a ' +
      'BulkDataURI (Pixel Data: its frames). Implicit VR files: VRs from a dictionary of common image attributes, others UN.',
    access: scopes('read:scans'),
    params,
    produces: JSON_TYPES,
    audit: 'dicomweb.metadata',
    handle: async ({ services, params: p, headers, audit }) => {
      const target = { studyUid: p.study ?? '', seriesUid: p.series, sopInstanceUid: p.instance };
      audit({ target: `study:${target.studyUid}` });
      const { items, patientIds } = await retrieveMetadata(services, target, baseOf(headers));
      audit({ patientIds });
      return dicomJson(items);
    },
  });
}

function renderedRoute(path: string, params: z.ZodType<{ study: string; series: string; instance: string; frame?: number }>): Route {
  return defineRoute({
    method: 'get',
    path: `${DICOMWEB_BASE}${path}`,
    summary: 'A frame rendered as PNG (WADO-RS rendered)',
    description: 'image/png (no JPEG encoder here), windowed by window=center,width or the file\'s default window; frames count from 1.',
    access: scopes('read:scans'),
    params,
    query: renderedQuery,
    produces: 'image/png',
    audit: 'dicomweb.rendered',
    handle: async ({ services, params: p, query, audit }) => {
      audit({ target: `instance:${p.instance}` });
      const [center, width] = query.window ? query.window.split(',').map(Number) : [];
      const window = center !== undefined && width !== undefined ? { center, width } : undefined;
      const { png, patientId } = await retrieveRendered(services, { studyUid: p.study, seriesUid: p.series, sopInstanceUid: p.instance }, p.frame ?? 1, window);
      audit({ patientId });
      return { kind: 'binary', contentType: 'image/png', body: png };
    },
  });
}

function storeRoute(path: string, params: z.ZodType<{ study?: string }> | undefined): Route {
  return defineRoute({
    method: 'post',
    path: `${DICOMWEB_BASE}${path}`,
    summary: 'Store instances (STOW-RS)',
    description:
      'multipart/related; type="application/dicom", through the same import as POST /v1/instances. Answers with the Store ' +
      'Instances Response (PS3.18 10.5.3) as application/dicom+json: ReferencedSOPSequence with Retrieve URLs, FailedSOPSequence ' +
      'with FailureReason (0xC000 cannot understand, 0x0122 not an image, 0xC122 transfer syntax without a decoder, 0x0111 the ' +
      'SOP Instance UID is stored with other content, 0xC409 another study than the path names). 200 all stored, 202 some, 409 none.',
    access: scopes('write:scans'),
    ...(params ? { params } : {}),
    upload: { contentTypes: ['multipart/related'], maxBytes: UPLOAD_LIMIT_BYTES },
    produces: JSON_TYPES,
    audit: 'dicomweb.store',
    handle: async ({ services, params: p, upload, auth, headers, audit }) => {
      if (!upload) throw new MiaError('internal', 'upload route without a body');
      const study = (p as { study?: string } | undefined)?.study;
      const result = await storeStudies(services, upload, auth.userId, study, baseOf(headers));
      audit({ target: result.jobId ? `import:${result.jobId}` : null, patientIds: result.patientIds });
      return { kind: 'stream', status: result.status, contentType: DICOM_JSON, body: Readable.from([Buffer.from(JSON.stringify(result.body))]) };
    },
  });
}

export const dicomwebRoutes: Route[] = [
  qidoRoute('/studies', 'study', 'study', undefined, 'Search studies (QIDO-RS)'),
  qidoRoute('/series', 'series', 'study', undefined, 'Search series of all studies (QIDO-RS)'),
  qidoRoute('/instances', 'instance', 'study', undefined, 'Search instances of all studies (QIDO-RS)'),
  qidoRoute('/studies/{study}/series', 'series', 'series', studyParams, 'Search the series of a study (QIDO-RS)'),
  qidoRoute('/studies/{study}/instances', 'instance', 'series', studyParams, 'Search the instances of a study (QIDO-RS)'),
  qidoRoute('/studies/{study}/series/{series}/instances', 'instance', 'instance', seriesParams, 'Search the instances of a series (QIDO-RS)'),
  retrieveRoute('/studies/{study}', studyParams, 'Retrieve a study\'s files (WADO-RS)'),
  retrieveRoute('/studies/{study}/series/{series}', seriesParams, 'Retrieve a series\' files (WADO-RS)'),
  retrieveRoute('/studies/{study}/series/{series}/instances/{instance}', instanceParams, 'Retrieve one file (WADO-RS)'),
  metadataRoute('/studies/{study}', studyParams, 'Metadata of a study\'s instances (WADO-RS)'),
  metadataRoute('/studies/{study}/series/{series}', seriesParams, 'Metadata of a series\' instances (WADO-RS)'),
  metadataRoute('/studies/{study}/series/{series}/instances/{instance}', instanceParams, 'Metadata of one instance (WADO-RS)'),
  defineRoute({
    method: 'get',
    path: `${DICOMWEB_BASE}/studies/{study}/series/{series}/instances/{instance}/frames/{frames}`,
    summary: 'Frames of an instance (WADO-RS)',
    description:
      'Frames numbered from 1, comma-separated, as multipart/related. Native data: application/octet-stream of little-endian ' +
      'samples. Compressed data: as stored with its media type (image/jpeg, image/jls, image/jp2, image/jphc, image/dicom-rle) ' +
      'when Accept names that type or transfer-syntax=*; otherwise decoded and sent as application/octet-stream.',
    access: scopes('read:scans'),
    params: framesParams,
    produces: 'multipart/related',
    audit: 'dicomweb.frames',
    handle: async ({ services, params: p, headers, audit }) => {
      audit({ target: `instance:${p.instance}` });
      const { body, patientIds } = await retrieveFrames(services, { studyUid: p.study, seriesUid: p.series, sopInstanceUid: p.instance }, p.frames, headers['accept']);
      audit({ patientIds });
      return { kind: 'stream', contentType: body.contentType, body: body.body };
    },
  }),
  renderedRoute('/studies/{study}/series/{series}/instances/{instance}/rendered', instanceParams),
  renderedRoute('/studies/{study}/series/{series}/instances/{instance}/frames/{frame}/rendered', frameParams),
  storeRoute('/studies', undefined),
  storeRoute('/studies/{study}', studyParams),
];
