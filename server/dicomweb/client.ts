/**
 * mia as a DICOMweb client: QIDO-RS searches of a remote server (Orthanc's /dicom-web, another
 * mia, a PACS) and WADO-RS retrieval of a study or series into the local archive through the
 * same upload pipeline as POST /v1/instances. The remote is a URL and the headers it wants (a
 * peer record's Authorization), given by the caller; they are never logged.
 *
 * A remote's answers are bounded like a client's requests: a search's JSON at MAX_SEARCH_BYTES,
 * a retrieval streamed to disk part by part (server/imports/multipart.ts) under a total size and
 * a part count, so a server that sends without end fills neither memory nor the disk.
 */
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { z } from 'zod';
import type { DicomJson } from '#server/dicomweb/qido.ts';
import { MiaError } from '#server/errors.ts';
import type { ImportDeps } from '#server/imports/imports.ts';
import { toImportCounts } from '#server/imports/import-views.ts';
import { receiveUpload, UPLOAD_LIMIT_BYTES } from '#server/imports/upload.ts';
import type { ImportJob } from '#server/api/import-schemas.ts';

export type DicomWebRemote = { url: string; headers: Readonly<Record<string, string>> };

/** A search's answer larger than this is refused: 16 MiB of DICOM JSON is tens of thousands of studies. */
export const MAX_SEARCH_BYTES = 16 * 1024 * 1024;
/** Instances one retrieval of a series may bring; a series beyond it is refused, not half-read. */
export const MAX_RETRIEVE_PARTS = 20_000;
const SEARCH_TIMEOUT_MS = 60_000;
/** A retrieval gives up when the remote sends nothing for this long (headers or body). */
export const RETRIEVE_IDLE_MS = 60_000;

const uid = z.string().regex(/^[0-9]+(\.[0-9]+)*$/).max(64);

function checkedUid(value: string, what: string): string {
  if (!uid.safeParse(value).success) throw new MiaError('invalid', `Invalid ${what}`, `${what}: expected a DICOM UID (digits and dots, at most 64)`);
  return value;
}
const dicomJsonArray = z.array(z.record(z.string().regex(/^[0-9A-Fa-f]{8}$/), z.object({ vr: z.string().length(2) }).passthrough()));

function remoteError(message: string, details: string): MiaError {
  return new MiaError('unprocessable', message, details);
}

function endpoint(remote: DicomWebRemote, path: string, query?: URLSearchParams): URL {
  const base = remote.url.replace(/\/+$/, '');
  const url = new URL(`${base}${path}`);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new MiaError('invalid', 'DICOMweb URL must be http or https', `url: ${url.protocol}`);
  if (query) url.search = query.toString();
  return url;
}

async function request(remote: DicomWebRemote, url: URL, accept: string, signal?: AbortSignal): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(url, { headers: { ...remote.headers, Accept: accept }, signal: signal ?? null, redirect: 'error' });
  } catch (err) {
    throw new MiaError('unprocessable', 'DICOMweb server unreachable', `${url.origin}: ${err instanceof Error ? err.message : 'fetch failed'}`.slice(0, 300));
  }
  if (response.status === 404) {
    await response.body?.cancel();
    throw new MiaError('not_found', 'Not found on the DICOMweb server', `${url.pathname.slice(0, 200)}: 404`);
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw remoteError('DICOMweb server refused the request', `${url.origin}${url.pathname.slice(0, 200)}: HTTP ${response.status}`);
  }
  return response;
}

/** Reads a body up to `max` bytes, refusing the rest. */
async function boundedText(response: Response, max: number): Promise<string> {
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (Number.isFinite(declared) && declared > max) {
    await response.body?.cancel();
    throw remoteError('DICOMweb answer too large', `more than ${max} bytes`);
  }
  if (!response.body) return '';
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of Readable.fromWeb(response.body as WebReadableStream<Uint8Array>)) {
    const buffer = chunk as Buffer;
    total += buffer.length;
    if (total > max) throw remoteError('DICOMweb answer too large', `more than ${max} bytes`);
    chunks.push(buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export type SearchLevel = 'studies' | 'series' | 'instances';

/**
 * QIDO-RS: `filters` are attribute=value pairs as a DICOMweb server takes them (PatientName,
 * StudyDate, includefield, limit...). Series and instances may be searched within a study.
 */
export async function searchRemote(
  remote: DicomWebRemote,
  level: SearchLevel,
  filters: Readonly<Record<string, string>>,
  within?: { studyUid?: string; seriesUid?: string },
): Promise<DicomJson[]> {
  let path = `/${level}`;
  if (within?.studyUid) {
    path = `/studies/${checkedUid(within.studyUid, 'study_uid')}${within.seriesUid ? `/series/${checkedUid(within.seriesUid, 'series_uid')}` : ''}/${level}`;
  }
  const response = await request(remote, endpoint(remote, path, new URLSearchParams(Object.entries(filters))), 'application/dicom+json, application/json', AbortSignal.timeout(SEARCH_TIMEOUT_MS));
  const text = await boundedText(response, MAX_SEARCH_BYTES);
  // PS3.18 10.6.3: no match may be 204 with no body.
  if (response.status === 204 || text.trim() === '') return [];
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw remoteError('DICOMweb answer is not JSON', 'expected application/dicom+json');
  }
  const parsed = dicomJsonArray.safeParse(json);
  if (!parsed.success) throw remoteError('DICOMweb answer is not a DICOM JSON array', parsed.error.issues[0]?.message ?? 'unexpected shape');
  return parsed.data as DicomJson[];
}

/** The first value of an attribute of a DICOM JSON result, as text. */
export function firstValue(item: DicomJson, tag: string): string {
  const value = item[tag]?.Value?.[0];
  if (value === undefined || value === null) return '';
  if (typeof value === 'object' && 'Alphabetic' in value) return String((value as { Alphabetic?: unknown }).Alphabetic ?? '');
  return String(value);
}

export type PullResult = {
  series: number;
  jobs: string[];
  counts: ImportJob['counts'];
  /** Instances the import refused or found conflicting, with the reason. */
  problems: string[];
};

type Counts = ImportJob['counts'];
const NO_COUNTS: Counts = { files_total: 0, files_seen: 0, imported: 0, duplicates: 0, conflicts: 0, rejected: 0, bytes: 0 };

function addCounts(a: Counts, b: Counts): Counts {
  const out = { ...a };
  for (const key of Object.keys(NO_COUNTS) as Array<keyof Counts>) out[key] = (a[key] ?? 0) + (b[key] ?? 0);
  return out;
}

/** The bytes of a body, aborting the exchange when none arrive for `idleMs`. */
async function* idleBounded(body: AsyncIterable<unknown>, idleMs: number, controller: AbortController): AsyncGenerator<Buffer> {
  const timer = setTimeout(() => controller.abort(), idleMs);
  try {
    for await (const chunk of body) {
      timer.refresh();
      yield chunk as Buffer;
    }
  } finally {
    clearTimeout(timer);
  }
}

/**
 * WADO-RS of one series (or study) into the archive: streamed to disk, then imported. A remote
 * that stops sending for RETRIEVE_IDLE_MS is given up on (a large series may take long; a stalled
 * one must not hold the spool and the job forever).
 */
async function retrieveInto(services: ImportDeps, remote: DicomWebRemote, path: string, createdBy: string, idleMs: number): Promise<{ jobId: string; counts: ImportJob['counts']; problems: string[] }> {
  const controller = new AbortController();
  const waiting = setTimeout(() => controller.abort(), idleMs);
  let response: Response;
  try {
    response = await request(remote, endpoint(remote, path), 'multipart/related; type="application/dicom"; transfer-syntax=*', controller.signal);
  } finally {
    clearTimeout(waiting);
  }
  const contentType = response.headers.get('content-type') ?? '';
  if (!/^multipart\/related\b/i.test(contentType)) {
    await response.body?.cancel();
    throw remoteError('DICOMweb server did not answer with multipart/related', `Content-Type: ${contentType.slice(0, 100)}`);
  }
  if (!response.body) throw remoteError('DICOMweb answer without a body', path.slice(0, 200));
  const stream = Readable.from(idleBounded(Readable.fromWeb(response.body as WebReadableStream<Uint8Array>), idleMs, controller));
  let upload;
  try {
    upload = await receiveUpload(services.dataDir, { contentType, stream, maxBytes: UPLOAD_LIMIT_BYTES }, MAX_RETRIEVE_PARTS);
  } catch (err) {
    const stalled = controller.signal.aborted;
    // Refused before its end (no boundary, too many parts): the rest is not wanted. Left to
    // flow, a remote's answer was read to its end, however long, with only the idle timer on it.
    controller.abort();
    stream.destroy();
    if (stalled) throw remoteError('DICOMweb server stopped sending', `nothing for ${idleMs / 1000} s during ${path.slice(0, 200)}`);
    if (err instanceof MiaError) throw err;
    throw remoteError('DICOMweb answer could not be read', err instanceof Error ? err.message.slice(0, 200) : 'stream failed');
  }
  const { job, outcomes } = await services.imports.importUpload(upload, createdBy);
  const problems = outcomes.flatMap((o) => (o.outcome === 'rejected' || o.outcome === 'conflict' ? [`part ${o.part}: ${o.reason}`] : []));
  return { jobId: job.public_id, counts: toImportCounts(job), problems };
}

/**
 * Pulls a study (series by series, each one retrieval and one import job, so a large study is
 * never one unbounded body) or one series into the local archive.
 */
export async function pullFromRemote(
  services: ImportDeps,
  remote: DicomWebRemote,
  target: { studyUid: string; seriesUid?: string | undefined },
  createdBy: string,
  options: { idleMs?: number } = {},
): Promise<PullResult> {
  const studyUid = checkedUid(target.studyUid, 'study_uid');
  let seriesUids: string[];
  if (target.seriesUid !== undefined) seriesUids = [checkedUid(target.seriesUid, 'series_uid')];
  else {
    const series = await searchRemote(remote, 'series', {}, { studyUid });
    seriesUids = series.map((s) => firstValue(s, '0020000E')).filter((s) => uid.safeParse(s).success);
    if (seriesUids.length === 0) throw new MiaError('not_found', 'Study not found on the DICOMweb server', `no series of study ${studyUid}`);
  }
  const result: PullResult = { series: 0, jobs: [], counts: NO_COUNTS, problems: [] };
  for (const seriesUid of seriesUids) {
    const one = await retrieveInto(services, remote, `/studies/${studyUid}/series/${seriesUid}`, createdBy, options.idleMs ?? RETRIEVE_IDLE_MS);
    result.series += 1;
    result.jobs.push(one.jobId);
    result.counts = addCounts(result.counts, one.counts);
    result.problems.push(...one.problems.slice(0, 100));
  }
  return result;
}
