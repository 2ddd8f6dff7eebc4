/**
 * A workstation's sync with its hub, one round (docs/sync.md): push its own changes (files
 * first), then pull what others did. Each step is safe to repeat from any point it was cut off:
 *
 * - A batch's Idempotency-Key is the digest of the batch, so a batch sent again after a
 *   lost answer gets the hub's first answer; a change id the hub has is accepted again anyway.
 * - A change leaves the outbox only when the hub's answer for it arrived: accepted, or refused
 *   for good (kept with the reason, for the reader). One the hub asks to send later (its file or
 *   its series is not there yet) stays, and the round stops pushing once a batch takes nothing.
 * - Pulled changes are applied, added to the local log and the cursor moved in one transaction;
 *   a change already here is skipped, so a pull repeated from an older cursor changes nothing.
 * - The local clock takes a pulled batch's timestamps only after that batch committed.
 *
 * Errors (the network, the hub) end the round with the error kept for `mia sync status` and the
 * UI; the next round starts over from what was committed.
 */
import { createHash } from 'node:crypto';
import { createReadStream, readFileSync, statSync } from 'node:fs';
import type { Clock } from '#server/clock.ts';
import { pullResponse, SYNC_PROTOCOL, type PullResponse, type PushResponse } from '#server/api/sync-schemas.ts';
import type { RefCache } from '#server/imports/ingest.ts';
import type { Logger } from '#server/log.ts';
import type { Database } from '#server/store/database.ts';
import { getSetting, setSetting } from '#server/store/settings.ts';
import {
  appendChanges,
  countInbox,
  countPendingOwnChanges,
  dropFromInbox,
  hasChange,
  keepInInbox,
  markPushed,
  notePushDeferred,
  readInbox,
  readInboxUnkeyed,
  readInboxWaitingFor,
  readPendingOwnChanges,
  type ChangeRow,
  type InboxRow,
} from '#server/store/sync-log.ts';
import { BUCKET_FILE_MAX, BUCKET_TYPE, blobPath, encodeBucket, hasBlob } from '#server/sync/blobs.ts';
import { applyChange, arrivalsOf, instancePayload, prepareChanges, type RemoteChange } from '#server/sync/entities.ts';
import { waitKey } from '#server/sync/wait-keys.ts';
import { parseHlc, type HlcTimestamp } from '#server/sync/hlc.ts';
import type { HubLink } from '#server/sync/hub-link.ts';
import { applyDirectory, directoryResponse } from '#server/sync/directory.ts';
import { decodeCursor } from '#server/sync/cursor.ts';
import { auditPushResponse, markAuditPushed, nextAuditBatch } from '#server/sync/audit-sync.ts';
import { assignedResponse, fetchAssignedFiles } from '#server/sync/assignments.ts';
import type { Replica, SyncEntity } from '#server/sync/replica.ts';

export type SyncDeps = { db: Database; clock: Clock; dataDir: string; replica: Replica; log?: Logger | undefined };

export type SyncProgress = { phase: 'files' | 'push' | 'pull'; done: number; total: number | null };

export type SyncReport = {
  pushed: number;
  refused: number;
  /** Changes the hub asked to send later (their file or series not there yet). */
  deferred: number;
  files: number;
  fileBytes: number;
  pulled: number;
  applied: number;
  /** Local users who became the hub's user of the same email this round. */
  usersAdopted: number;
  auditEvents: number;
  /** Files of assigned studies fetched from the hub. */
  filesFetched: number;
  /** Pulled changes tried again this round (their file or record had arrived), and those still waiting after it. */
  retried: number;
  inbox: number;
  warning: string | null;
};

export const PUSH_BATCH = 500;
/** Under the hub's 32 MB limit for a push's JSON, with room for the envelope. */
const PUSH_MAX_BYTES = 16 * 1024 * 1024;
const REQUEST_TIMEOUT_MS = 30_000;
/** Half the hub's bucket limit: a bucket of small files, sent as one request. */
const CLIENT_BUCKET_BYTES = 16 * 1024 * 1024;
const CLIENT_BUCKET_FILES = 500;
/** A large file's range: what one cut-off request can cost to send again. */
const RANGE_BYTES = 8 * 1024 * 1024;
/** A file's upload may take longer than a request: at least 1 MB/s is expected of the link. */
const fileTimeout = (bytes: number): number => REQUEST_TIMEOUT_MS + Math.ceil(bytes / 1_000_000) * 1000;

const CURSOR = 'sync.cursor';
/** Waiting changes tried per transaction. */
const INBOX_PAGE = 500;
export const LAST_SUCCESS = 'sync.last_success_at';
export const LAST_ERROR = 'sync.last_error';
export const LAST_ATTEMPT = 'sync.last_attempt_at';

/** The newest hub change number this workstation has pulled. */
export async function readPulledSeq(db: Database): Promise<number> {
  try {
    return decodeCursor((await getSetting(db, CURSOR)) ?? '');
  } catch {
    return 0;
  }
}

export class SyncError extends Error {
  /** The connection failed before an answer (not a timeout, not the hub's refusal). */
  readonly retryable: boolean;
  /** The hub's refusal: its HTTP status and the error envelope's details (what was wrong, where). */
  readonly refusal: { status: number; details: string } | null;
  constructor(message: string, retryable = false, refusal: { status: number; details: string } | null = null) {
    super(message);
    this.name = 'SyncError';
    this.retryable = retryable;
    this.refusal = refusal;
  }
}

async function send(link: HubLink, c: Call, signal?: AbortSignal): Promise<Response> {
  const headers: Record<string, string> = { authorization: `Bearer ${link.key}`, 'mia-sync-protocol': String(SYNC_PROTOCOL), accept: 'application/json', ...c.headers };
  let body: RequestInit['body'] | undefined;
  let file: ReturnType<typeof createReadStream> | undefined;
  if (c.stream) {
    headers['content-type'] = 'application/octet-stream';
    headers['content-length'] = String(c.stream.bytes);
    const start = c.stream.start ?? 0;
    file = createReadStream(c.stream.file, { start, end: start + c.stream.bytes - 1 });
    body = file as unknown as RequestInit['body'];
  } else if (c.raw) {
    headers['content-type'] = c.raw.contentType;
    body = c.raw.body;
  } else if (c.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(c.body);
  }
  const where = `${c.method} ${c.path.split('?')[0] ?? ''}`;
  const ms = c.timeoutMs ?? REQUEST_TIMEOUT_MS;
  // Our own deadline on a timer that holds the process: Node's fetch has been seen to leave a
  // request whose connection was reset as it opened neither settled nor holding anything, and a
  // CLI would then exit in silence mid-round (exit code 13) instead of saying the hub is away.
  const controller = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort();
      reject(new SyncError(`hub unreachable: ${where} timed out after ${Math.round(ms / 1000)} s`));
    }, ms);
  });
  try {
    return await Promise.race([
      fetch(new URL(c.path, link.url), {
        method: c.method,
        headers,
        body,
        signal: signal ? AbortSignal.any([signal, controller.signal]) : controller.signal,
        ...(c.stream ? { duplex: 'half' } : {}),
      } as RequestInit),
      deadline,
    ]);
  } catch (err) {
    // The file was opened for the body; a request that never connected (refused, a name that
    // does not resolve) is not read from, and fetch leaves it open: one descriptor per try.
    file?.destroy();
    if (err instanceof SyncError) throw err;
    const cause = err instanceof Error && err.cause instanceof Error ? err.cause : undefined;
    // Only a connection that was open and then closed under the request (a kept-alive socket the
    // hub or the network dropped) is worth a second try; a refused or reset connect means the hub
    // is not reachable now.
    const code = cause && 'code' in cause ? String(cause.code) : '';
    throw new SyncError(`hub unreachable: ${where} failed${cause ? `: ${cause.message}` : ''}`, code === 'UND_ERR_SOCKET');
  } finally {
    clearTimeout(timer);
  }
}

type Call = {
  method: string;
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
  timeoutMs?: number;
  /** A file, or `bytes` of it from `start`, streamed as the body. */
  stream?: { file: string; bytes: number; start?: number };
  raw?: { body: Buffer; contentType: string };
};

async function call<T>(link: HubLink, c: Call, signal?: AbortSignal): Promise<T> {
  // Every sync request is safe to send twice (pushes carry their Idempotency-Key, files their
  // digest): one whose connection failed - a kept-alive socket the hub closed during an outage -
  // is sent once more on a new connection before the round gives up.
  let res: Response;
  try {
    res = await send(link, c, signal);
  } catch (err) {
    if (err instanceof SyncError && err.retryable && !signal?.aborted) res = await send(link, c, signal);
    else throw err;
  }
  let parsed: unknown;
  try {
    parsed = await res.json();
  } catch {
    throw new SyncError(`hub answered ${res.status} without JSON to ${c.method} ${c.path.split('?')[0] ?? ''}`);
  }
  if (!res.ok) {
    const e = (parsed as { error?: { message?: string; details?: string } }).error;
    throw new SyncError(`hub refused ${c.method} ${c.path.split('?')[0] ?? ''}: ${res.status} ${e?.message ?? ''}${e?.details ? ` (${e.details})` : ''}`, false, { status: res.status, details: e?.details ?? '' });
  }
  return (parsed as { data: T }).data;
}

/** Who the key belongs to on the hub: checks the link before it is kept. */
export async function hello(link: Omit<HubLink, 'device_id' | 'device_name'> & Partial<HubLink>, signal?: AbortSignal): Promise<{ device_id: string; device_name: string; protocol: number; hub_time: string }> {
  return await call({ device_id: '', device_name: '', ...link }, { method: 'GET', path: '/v1/sync/hello' }, signal);
}

export async function syncOnce(deps: SyncDeps, link: HubLink, options: { onProgress?: (p: SyncProgress) => void; signal?: AbortSignal } = {}): Promise<SyncReport> {
  const report: SyncReport = { pushed: 0, refused: 0, deferred: 0, files: 0, fileBytes: 0, pulled: 0, applied: 0, usersAdopted: 0, auditEvents: 0, filesFetched: 0, retried: 0, inbox: 0, warning: null };
  await setSetting(deps.db, LAST_ATTEMPT, deps.clock.now().toISOString());
  try {
    // People first: a change made by a local user who is the hub's user of the same email then
    // leaves under the hub's id, and a pulled report finds its author here.
    await takeDirectory(deps, link, report, options);
    await push(deps, link, report, options);
    await pushAudit(deps, link, report, options);
    await pull(deps, link, report, options);
    await fetchAssigned(deps, link, report, options);
    report.inbox = await countInbox(deps.db);
    await setSetting(deps.db, LAST_SUCCESS, deps.clock.now().toISOString());
    await setSetting(deps.db, LAST_ERROR, '');
    return report;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    try {
      await setSetting(deps.db, LAST_ERROR, message.slice(0, 500));
    } catch {
      // The database itself failing is reported by the throw below.
    }
    throw err;
  }
}

async function takeDirectory(deps: SyncDeps, link: HubLink, report: SyncReport, options: { signal?: AbortSignal }): Promise<void> {
  const answer = directoryResponse.safeParse(await call<unknown>(link, { method: 'GET', path: '/v1/sync/directory' }, options.signal));
  if (!answer.success) throw new SyncError(`hub sent a directory this mia cannot read (${answer.error.issues[0]?.path.join('.') ?? ''}: ${answer.error.issues[0]?.message ?? ''}); upgrade mia`);
  const at = deps.clock.now().toISOString();
  const { adopted } = await deps.db.transaction(async (tx) => await applyDirectory(tx, deps.replica.deviceId, answer.data, at));
  report.usersAdopted += adopted;
}

/** This workstation's audit events, up to the hub (server/sync/audit-sync.ts). */
async function pushAudit(deps: SyncDeps, link: HubLink, report: SyncReport, options: { signal?: AbortSignal }): Promise<void> {
  for (let batch = await nextAuditBatch(deps.db, deps.clock.now()); batch; batch = await nextAuditBatch(deps.db, deps.clock.now())) {
    const answer = auditPushResponse.safeParse(await call<unknown>(link, { method: 'POST', path: '/v1/sync/audit', body: batch }, options.signal));
    if (!answer.success) throw new SyncError('hub sent an audit answer this mia cannot read; upgrade mia');
    await markAuditPushed(deps.db, batch.events[batch.events.length - 1]!.seq);
    report.auditEvents += batch.events.length;
  }
}

/**
 * The studies assigned to this workstation: their files, fetched when missing; then the changes
 * that waited for those files (instances, and the analyses, verdicts and reports on them) go in.
 */
async function fetchAssigned(deps: SyncDeps, link: HubLink, report: SyncReport, options: { onProgress?: (p: SyncProgress) => void; signal?: AbortSignal }): Promise<void> {
  // The version of the last list whose files are all here: the hub then answers `unchanged`
  // instead of every file again. Once an hour the whole list is checked (a file removed here).
  const now = deps.clock.now();
  const checked = Date.parse((await getSetting(deps.db, ASSIGNED_CHECKED)) ?? '');
  const known = now.getTime() - checked < ASSIGNED_CHECK_EVERY_MS ? await getSetting(deps.db, ASSIGNED_VERSION) : undefined;
  const path = `/v1/sync/assigned${known ? `?known=${known}` : ''}`;
  const answer = assignedResponse.safeParse(await call<unknown>(link, { method: 'GET', path }, options.signal));
  if (!answer.success) throw new SyncError('hub sent a list of assigned studies this mia cannot read; upgrade mia');
  if (answer.data.unchanged) return;
  let done = 0;
  const arrived: string[] = [];
  try {
    await fetchAssignedFiles(
      deps.dataDir,
      answer.data,
      async (sha256, bytes) => await send(link, { method: 'GET', path: `/v1/sync/blobs/${sha256}`, timeoutMs: fileTimeout(bytes), headers: { accept: 'application/dicom' } }, options.signal),
      (sha256, bytes) => {
        arrived.push(waitKey.file(sha256));
        report.filesFetched += 1;
        report.fileBytes += bytes;
        options.onProgress?.({ phase: 'files', done: ++done, total: null });
      },
    );
  } finally {
    // Also when a later file failed: the next round does not fetch these again, so their
    // changes go in now.
    if (arrived.length > 0 && !options.signal?.aborted) await retryInbox(deps, report, arrived);
  }
  // Every file of the list is here (a failure above throws before this).
  if (answer.data.version) {
    await setSetting(deps.db, ASSIGNED_VERSION, answer.data.version);
    await setSetting(deps.db, ASSIGNED_CHECKED, now.toISOString());
  }
}

/** The next batch of the outbox: at most 500 changes and 16 MB of JSON. */
function batchOf(rows: readonly ChangeRow[]): ChangeRow[] {
  const batch: ChangeRow[] = [];
  let bytes = 0;
  for (const row of rows) {
    bytes += row.payload.length + 300;
    if (batch.length > 0 && bytes > PUSH_MAX_BYTES) break;
    batch.push(row);
  }
  return batch;
}

/**
 * Whether the hub refused a push for what its changes carry (a value it will not store, a body
 * too large), not for who sent it or when: the same changes would be refused again. `alone`: the
 * push held one change, which the refusal must then name (its details point at `changes.0`).
 */
function refusedForContent(err: unknown, alone: boolean): boolean {
  if (!(err instanceof SyncError) || err.refusal === null) return false;
  const { status, details } = err.refusal;
  if (status === 413) return true;
  return status === 400 && (!alone || /\bchanges\.0\b/.test(details));
}

type PushOptions = { onProgress?: (p: SyncProgress) => void; signal?: AbortSignal };
/** What a batch's push came to: changes taken, and whether the hub refused none for good. */
type BatchOutcome = { taken: number; noneRefused: boolean };

async function push(deps: SyncDeps, link: HubLink, report: SyncReport, options: PushOptions): Promise<void> {
  const { pending } = await countPendingOwnChanges(deps.db, deps.replica.deviceId);
  let done = 0;
  // Changes the hub asked to send later: not sent again this round.
  const waiting = new Set<string>();
  try {
    for (;;) {
      const rows = (await readPendingOwnChanges(deps.db, deps.replica.deviceId, PUSH_BATCH + waiting.size)).filter((r) => !waiting.has(r.change_id));
      if (rows.length === 0) return;
      const outcome = await pushSplitting(deps, link, batchOf(rows.slice(0, PUSH_BATCH)), report, waiting, options);
      report.pushed += outcome.taken;
      done += outcome.taken;
      options.onProgress?.({ phase: 'push', done, total: pending });
      // Nothing of this batch could be taken now: what waits goes in a later round.
      if (outcome.taken === 0 && outcome.noneRefused) return;
    }
  } finally {
    report.deferred = waiting.size;
  }
}

/**
 * A batch the hub refuses as a whole for its content is sent again in halves, down to the
 * changes it refuses alone, which are marked refused with the hub's reason. Otherwise one such
 * change (a value stored before this version refused it, a field a newer hub checks) would stop
 * every later change of this workstation from ever reaching the hub.
 */
async function pushSplitting(deps: SyncDeps, link: HubLink, batch: readonly ChangeRow[], report: SyncReport, waiting: Set<string>, options: PushOptions): Promise<BatchOutcome> {
  try {
    return await pushBatch(deps, link, batch, report, waiting, options);
  } catch (err) {
    if (!refusedForContent(err, batch.length === 1)) throw err;
    if (batch.length === 1) {
      await markPushed(deps.db, (batch[0] as ChangeRow).change_id, 'rejected', (err as SyncError).message);
      report.refused += 1;
      return { taken: 0, noneRefused: false };
    }
    const half = Math.ceil(batch.length / 2);
    const first = await pushSplitting(deps, link, batch.slice(0, half), report, waiting, options);
    const second = await pushSplitting(deps, link, batch.slice(half), report, waiting, options);
    return { taken: first.taken + second.taken, noneRefused: first.noneRefused && second.noneRefused };
  }
}

async function pushBatch(deps: SyncDeps, link: HubLink, all: readonly ChangeRow[], report: SyncReport, waiting: Set<string>, options: PushOptions): Promise<BatchOutcome> {
  const damaged = await sendFiles(deps, link, all, report, options);
  // A change whose file no longer matches its digest here would be refused for that file in
  // every round: set aside with the reason, so the rest go on and an admin can see which.
  const batch: ChangeRow[] = [];
  for (const row of all) {
    const sha = instanceFileOf(row);
    const actual = sha === null ? undefined : damaged.get(sha);
    if (sha === null || actual === undefined) {
      batch.push(row);
      continue;
    }
    await markPushed(deps.db, row.change_id, 'rejected', `its file in this workstation's archive is damaged: it hashes to ${actual}, not ${sha}`);
    report.refused += 1;
  }
  if (batch.length === 0) return { taken: 0, noneRefused: false };
  const body = { changes: batch.map((r) => ({ change_id: r.change_id, entity: r.entity, key: r.entity_key, op: r.op, hlc: r.hlc, user_id: r.user_id, payload: JSON.parse(r.payload) as unknown })) };
  // The key names this exact batch: the same changes sent again after a lost answer get the
  // first answer; changes re-labelled since (their user became the hub's) are a new batch.
  const answer = await call<PushResponse>(link, {
    method: 'POST',
    path: '/v1/sync/push',
    headers: { 'idempotency-key': createHash('sha256').update(JSON.stringify(body)).digest('hex'), 'mia-device-time': deps.clock.now().toISOString() },
    body,
  }, options.signal);
  report.warning ??= answer.warning;
  let taken = 0;
  await deps.db.transaction(async (tx) => {
    for (const r of answer.results) {
      if (r.status === 'accepted') {
        await markPushed(tx, r.change_id, 'accepted', null);
        taken += 1;
      } else if (r.retry) {
        waiting.add(r.change_id);
        await notePushDeferred(tx, r.change_id, r.reason ?? 'the hub asked to send it later');
      }
      else {
        await markPushed(tx, r.change_id, 'rejected', r.reason ?? 'refused by the hub');
        report.refused += 1;
      }
    }
  });
  return { taken, noneRefused: answer.results.every((r) => r.status === 'accepted' || r.retry) };
}

/** The archived file an instance change names, or null. */
function instanceFileOf(row: ChangeRow): string | null {
  if (row.entity !== 'instance') return null;
  const payload = instancePayload.safeParse(JSON.parse(row.payload));
  return payload.success ? payload.data.sha256 : null;
}

async function fileDigest(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

/**
 * Uploads the files a batch's instance changes name that the hub lacks, before the batch.
 * Resolves with the files found damaged here (their digest now), which are not sent: a small
 * file is checked as it is read for its bucket, a large one once the hub refused it.
 */
async function sendFiles(deps: SyncDeps, link: HubLink, batch: readonly ChangeRow[], report: SyncReport, options: { onProgress?: (p: SyncProgress) => void; signal?: AbortSignal }): Promise<Map<string, string>> {
  const damaged = new Map<string, string>();
  const hashes = batch.map(instanceFileOf).filter((sha): sha is string => sha !== null && hasBlob(deps.dataDir, sha));
  if (hashes.length === 0) return damaged;
  const { missing } = await call<{ missing: string[] }>(link, { method: 'POST', path: '/v1/sync/blobs/missing', body: { sha256: [...new Set(hashes)] } }, options.signal);
  let done = 0;
  const progress = (files: number, bytes: number): void => {
    report.files += files;
    report.fileBytes += bytes;
    done += files;
    options.onProgress?.({ phase: 'files', done, total: missing.length });
  };
  // Small files travel in buckets (their fsyncs on the hub run together); large ones streamed alone.
  let bucket: { sha256: string; bytes: Buffer }[] = [];
  let bucketBytes = 0;
  const flushBucket = async (): Promise<void> => {
    if (bucket.length === 0) return;
    const body = encodeBucket(bucket);
    await call(link, { method: 'POST', path: '/v1/sync/blobs', raw: { body, contentType: BUCKET_TYPE }, timeoutMs: fileTimeout(body.byteLength) }, options.signal);
    progress(bucket.length, bucketBytes);
    bucket = [];
    bucketBytes = 0;
  };
  for (const sha of missing) {
    const file = blobPath(deps.dataDir, sha);
    const bytes = statSync(file).size;
    if (bytes > BUCKET_FILE_MAX) {
      try {
        await sendInRanges(link, sha, file, bytes, options.signal);
      } catch (err) {
        // 422: what the hub received does not hash to the name; damaged here, or on the way.
        const refusedFile = err instanceof SyncError && err.refusal?.status === 422;
        const actual = refusedFile ? await fileDigest(file) : sha;
        if (actual === sha) throw err;
        damaged.set(sha, actual);
        continue;
      }
      progress(1, bytes);
      continue;
    }
    const content = readFileSync(file);
    const actual = createHash('sha256').update(content).digest('hex');
    if (actual !== sha) {
      damaged.set(sha, actual);
      continue;
    }
    if (bucketBytes + bytes > CLIENT_BUCKET_BYTES || bucket.length >= CLIENT_BUCKET_FILES) await flushBucket();
    bucket.push({ sha256: sha, bytes: content });
    bucketBytes += bytes;
  }
  await flushBucket();
  return damaged;
}

/**
 * A large file goes in ranges, each durable on the hub before the next (server/sync/resumable.ts):
 * a round cut off mid-file starts the next one where the hub's copy ends, not from byte 0.
 */
export async function sendInRanges(link: HubLink, sha256: string, file: string, bytes: number, signal?: AbortSignal): Promise<void> {
  const state = await call<{ received: number; complete: boolean }>(link, { method: 'GET', path: `/v1/sync/blobs/${sha256}/upload` }, signal);
  let offset = state.complete ? bytes : Math.min(state.received, bytes);
  while (offset < bytes) {
    const length = Math.min(RANGE_BYTES, bytes - offset);
    const answer = await call<{ received: number; complete: boolean }>(link, {
      method: 'PUT',
      path: `/v1/sync/blobs/${sha256}`,
      stream: { file, bytes: length, start: offset },
      headers: { 'content-range': `bytes ${offset}-${offset + length - 1}/${bytes}` },
      timeoutMs: fileTimeout(length),
    }, signal);
    if (answer.complete) return;
    if (answer.received <= offset) throw new SyncError(`hub took no bytes of file ${sha256} at byte ${offset}`);
    offset = answer.received;
  }
}

async function pull(deps: SyncDeps, link: HubLink, report: SyncReport, options: { onProgress?: (p: SyncProgress) => void; signal?: AbortSignal }): Promise<void> {
  /** What the changes taken brought: the waiting changes it wakes are tried after the pages. */
  const arrived: string[] = [];
  let pulled = false;
  try {
    for (;;) {
      const cursor = (await getSetting(deps.db, CURSOR)) ?? '';
      // The hub's answer is checked like any input: a change of an unknown kind refuses the page.
      const answer = pullResponse.safeParse(await call<unknown>(link, { method: 'GET', path: `/v1/sync/pull?limit=500${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}` }, options.signal));
      if (!answer.success) throw new SyncError(`hub sent a pull page this mia cannot read (${answer.error.issues[0]?.path.join('.') ?? ''}: ${answer.error.issues[0]?.message ?? ''}); upgrade mia`);
      const page: PullResponse = answer.data;
      report.pulled += page.changes.length;
      const stamps = page.changes.map((c) => parseHlc(c.hlc)).filter((t): t is HlcTimestamp => t !== undefined);
      const received = deps.replica.hlc.receive(stamps);
      const remote: RemoteChange[] = page.changes.map((c) => ({ change_id: c.change_id, device_id: c.device_id, entity: c.entity, key: c.key, hlc: c.hlc, user_id: c.user_id, payload: c.payload }));
      // Instances come down by assignment: one whose file is not here waits in the inbox for it.
      const prepared = await prepareChanges(deps.db, deps.dataDir, remote);
      const at = deps.clock.now().toISOString();
      const applied = await deps.db.transaction(async (tx) => {
        const taken = await applyPulled(deps, tx, remote, prepared, at);
        await setSetting(tx, CURSOR, page.cursor);
        return taken;
      });
      if (received.ok) deps.replica.hlc.advance(received.state);
      report.applied += applied.length;
      for (const c of applied) arrived.push(...arrivalsOf(c, prepared));
      options.onProgress?.({ phase: 'pull', done: report.pulled, total: null });
      if (!page.has_more) break;
    }
    pulled = true;
  } finally {
    // Also when a later page failed: what the committed pages brought goes in now, not at the
    // next sweep.
    if ((pulled || arrived.length > 0) && !options.signal?.aborted) await retryInbox(deps, report, arrived);
  }
}

/**
 * Applies pulled changes in the caller's transaction: each in its own savepoint; one that names
 * what is not here yet waits in the inbox; one refused for good is logged (not its content).
 * Returns the changes taken.
 */
async function applyPulled(deps: SyncDeps, tx: Database, changes: readonly RemoteChange[], prepared: Awaited<ReturnType<typeof prepareChanges>>, at: string): Promise<RemoteChange[]> {
  const refs: RefCache = new Map();
  const taken: RemoteChange[] = [];
  for (const c of changes) {
    if (await hasChange(tx, c.change_id)) {
      await dropFromInbox(tx, c.change_id);
      continue;
    }
    const outcome = await tx.transaction(async (inner) => await applyChange(inner, c, prepared, refs, at));
    const row = { change_id: c.change_id, device_id: c.device_id, entity: c.entity, entity_key: c.key, op: 'put', hlc: c.hlc, user_id: c.user_id, payload: JSON.stringify(c.payload) };
    if (outcome.status === 'accepted') {
      taken.push(c);
      await dropFromInbox(tx, c.change_id);
    } else if (outcome.retry) {
      await keepInInbox(tx, row, outcome.reason, outcome.waitsFor ?? null, at);
    } else {
      await dropFromInbox(tx, c.change_id);
      deps.log?.error('sync.pull_refused', { entity: c.entity, change_id: c.change_id, reason: outcome.reason.slice(0, 200) });
    }
  }
  await appendChanges(tx, taken.map((c) => ({ changeId: c.change_id, deviceId: c.device_id, entity: c.entity, entityKey: c.key, op: 'put', hlc: c.hlc, userId: c.user_id, payload: JSON.stringify(c.payload) })), at);
  return taken;
}

/** The version of the assigned studies' list whose files are all here, and when the list was last read whole. */
const ASSIGNED_VERSION = 'sync.assigned_version';
const ASSIGNED_CHECKED = 'sync.assigned_checked_at';
const ASSIGNED_CHECK_EVERY_MS = 60 * 60 * 1000;

/** When the whole inbox was last tried again, per database (a setting: `mia sync now` is a process of its own). */
const INBOX_SWEPT = 'sync.inbox_swept_at';
/**
 * Every waiting change is tried again at least this often, whatever arrived: a file imported
 * here rather than fetched, or anything else no wait key names.
 */
const SWEEP_EVERY_MS = 60 * 60 * 1000;
/** Wait keys looked up at a time (each a probe of the waits_for index). */
const KEYS_PER_READ = 500;

/**
 * Changes that waited for what has now arrived (`arrived`: wait keys, wait-keys.ts), tried again
 * in the order they came; what they bring wakes the next ones (an instance its series' analysis,
 * the analysis its findings' verdicts), for a few passes. Changes waiting for nothing named are
 * tried each round, and every one once an hour. A workstation holding the hub's changes for
 * studies not assigned to it (millions of instances waiting for files it never fetches) so no
 * longer reads, parses and writes all of them again at every round.
 */
async function retryInbox(deps: SyncDeps, report: SyncReport, arrived: readonly string[]): Promise<void> {
  const now = deps.clock.now();
  const swept = Date.parse((await getSetting(deps.db, INBOX_SWEPT)) ?? '');
  const sweep = !(now.getTime() - swept < SWEEP_EVERY_MS);
  const retry = async (rows: readonly (InboxRow & { id: number })[]): Promise<string[]> => {
    if (rows.length === 0) return [];
    report.retried += rows.length;
    const remote: RemoteChange[] = rows.map((r) => ({ change_id: r.change_id, device_id: r.device_id, entity: r.entity as SyncEntity, key: r.entity_key, hlc: r.hlc, user_id: r.user_id, payload: JSON.parse(r.payload) as unknown }));
    const prepared = await prepareChanges(deps.db, deps.dataDir, remote);
    const at = deps.clock.now().toISOString();
    const taken = await deps.db.transaction(async (tx) => await applyPulled(deps, tx, remote, prepared, at));
    report.applied += taken.length;
    return taken.flatMap((c) => arrivalsOf(c, prepared));
  };
  let wake = [...new Set(arrived)];
  // A change can wait for another waiting one (an addendum for its report): a few passes, each
  // over what the last one brought, stopping at the first that brings nothing.
  for (let pass = 0; pass < 5; pass++) {
    const next: string[] = [];
    if (pass === 0 && sweep) {
      for (let after = 0; ; ) {
        const rows = await readInbox(deps.db, after, INBOX_PAGE);
        if (rows.length === 0) break;
        after = rows[rows.length - 1]!.id;
        next.push(...(await retry(rows)));
      }
      await setSetting(deps.db, INBOX_SWEPT, now.toISOString());
    } else {
      for (let i = 0; i < wake.length; i += KEYS_PER_READ) next.push(...(await retry(await readInboxWaitingFor(deps.db, wake.slice(i, i + KEYS_PER_READ)))));
      for (let after = 0; ; ) {
        const rows = await readInboxUnkeyed(deps.db, after, INBOX_PAGE);
        if (rows.length === 0) break;
        after = rows[rows.length - 1]!.id;
        next.push(...(await retry(rows)));
      }
    }
    wake = [...new Set(next)];
    if (wake.length === 0) break;
  }
}
