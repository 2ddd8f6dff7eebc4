/**
 * Sends due send jobs (issue 14, item 5). Each job is claimed like an analysis (server/jobs/jobs.ts:
 * one node owns it while sending, so two nodes of a hub never send it twice), its object is built
 * or read, and it goes to the peer by C-STORE or STOW-RS. A transient failure is tried again after
 * a backoff (10 s, 30 s, 2 min, 10 min, 30 min, then hourly, each +-20 % so jobs failed together
 * do not return together) until `maxAttempts`; a permanent refusal gives up at once. Every attempt
 * is audited (routing.send: the job, the peer, the outcome; never patient data).
 */
import { recordAudit } from '#server/audit/audit.ts';
import { MiaError } from '#server/errors.ts';
import { claimNextSend, isAbandoned } from '#server/jobs/jobs.ts';
import type { DicomWebPeer } from '#server/peers/peers.ts';
import type { Services } from '#server/services.ts';
import { findPeer } from '#server/store/dicom-peers.ts';
import { finishSendJob, listRunningSends, nextDueAt, requeueSend, type ObjectKind, type SendJobRow } from '#server/store/routing.ts';
import { networkError, readPart10, type RoutedObject, type SendOutcome } from '#server/routing/send-outcome.ts';
import { stowSend } from '#server/routing/stow-sender.ts';

/** Delays before attempt 2, 3, ...; the last one repeats. */
export const BACKOFF_MS = [10_000, 30_000, 120_000, 600_000, 1_800_000, 3_600_000] as const;
export const JITTER = 0.2;
export const DEFAULT_MAX_ATTEMPTS = 8;
/** How often the background loop looks for jobs whose sending node is gone (real time). */
const RECLAIM_EVERY_MS = 10_000;

export function backoffMs(attempts: number, random: () => number = Math.random): number {
  const base = BACKOFF_MS[Math.min(Math.max(attempts, 1), BACKOFF_MS.length) - 1] ?? BACKOFF_MS[0];
  return Math.round(base * (1 + JITTER * (2 * random() - 1)));
}

/** A C-STORE association's ends: the peer, and mia's own AE title as the calling AE. */
export type CStoreDestination = { name: string; host: string; port: number; calledAeTitle: string; callingAeTitle: string };
/** Sends one object by C-STORE (server/routing/cstore-sender.ts). */
export type CStoreSender = (destination: CStoreDestination, object: RoutedObject) => Promise<SendOutcome>;
export type StowSender = (peer: DicomWebPeer, object: RoutedObject, signal: AbortSignal) => Promise<SendOutcome>;

/** Builds the Part 10 bytes of what a job sends: an analysis's or report's SR (written again,
 * deterministically, at each attempt), or a stored instance. */
export type ObjectSource = (services: Services, kind: ObjectKind, subject: string) => Promise<Buffer>;

export type SendWorkerOptions = {
  source: ObjectSource;
  cStore: CStoreSender | null;
  stow?: StowSender;
  /** mia's AE title, the calling AE of its associations. */
  aeTitle: string;
  maxAttempts: number;
  /** How often the background loop looks for due jobs, ms (real time; due times use the clock). */
  pollMs: number;
  random?: () => number;
};

export type SendWorker = {
  start(): void;
  /** Sends every job due now (and waits for sends already under way); the CLI and tests call it. */
  runDue(): Promise<number>;
  stop(): Promise<void>;
};

type Attempt = { outcome: SendOutcome; sopInstanceUid: string | null; target: string };

export function createSendWorker(services: Services, options: SendWorkerOptions): SendWorker {
  const { db, clock, node, log } = services;
  const stow = options.stow ?? stowSend;
  const random = options.random ?? Math.random;
  const controller = new AbortController();
  const inFlight = new Set<Promise<unknown>>();
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let looping: Promise<number> | undefined;
  let lastReclaim = 0;

  const attempt = async (job: SendJobRow): Promise<Attempt> => {
    const target = `send:${job.public_id} peer:${job.peer_id} ${job.object_kind}:${job.subject}`;
    const peer = await findPeer(db, job.peer_id);
    if (!peer) return { outcome: { kind: 'permanent', error: 'the peer was removed' }, sopInstanceUid: null, target };
    let object: RoutedObject | undefined;
    try {
      object = readPart10(await options.source(services, job.object_kind, job.subject));
    } catch (err) {
      // The analysis or report is gone, or cannot be written as DICOM: no retry changes that.
      const reason = err instanceof MiaError ? `${err.message}${err.details ? `: ${err.details}` : ''}` : 'could not build the object';
      return { outcome: { kind: 'permanent', error: reason }, sopInstanceUid: null, target };
    }
    if (!object) return { outcome: { kind: 'permanent', error: 'the object is not a DICOM Part 10 file' }, sopInstanceUid: null, target };
    if (peer.kind === 'dicomweb') {
      const headers: Record<string, string> = peer.auth_header ? { Authorization: peer.auth_header } : {};
      return { outcome: await stow({ name: peer.name, url: peer.url ?? '', headers }, object, controller.signal), sopInstanceUid: object.sopInstanceUid, target };
    }
    if (!options.cStore) return { outcome: { kind: 'transient', error: 'C-STORE is not available in this mia' }, sopInstanceUid: object.sopInstanceUid, target };
    const destination = { name: peer.name, host: peer.host ?? '', port: Number(peer.port), calledAeTitle: peer.ae_title ?? '', callingAeTitle: options.aeTitle };
    try {
      return { outcome: await options.cStore(destination, object), sopInstanceUid: object.sopInstanceUid, target };
    } catch (err) {
      return { outcome: { kind: 'transient', error: `C-STORE to ${peer.name}: ${networkError(err)}` }, sopInstanceUid: object.sopInstanceUid, target };
    }
  };

  const runJob = async (job: SendJobRow): Promise<void> => {
    const release = node.hold('send', job.id);
    try {
      const { outcome, sopInstanceUid, target } = await attempt(job);
      const at = clock.now();
      const giveUp = outcome.kind === 'permanent' || (outcome.kind === 'transient' && job.attempts >= options.maxAttempts);
      const status = outcome.kind === 'sent' ? 'sent' : giveUp ? 'gave_up' : 'failed';
      const error = outcome.kind === 'sent' ? null : outcome.kind === 'transient' && giveUp ? `${outcome.error} (gave up after ${job.attempts} attempts)` : outcome.error;
      const nextAttemptAt = status === 'failed' ? new Date(at.getTime() + backoffMs(job.attempts, random)).toISOString() : null;
      const owner = { node: node.id, pid: node.pid };
      const finished = await db.transaction(async (tx) => {
        if (!await finishSendJob(tx, job.id, owner, { status, error, nextAttemptAt, sopInstanceUid, at: at.toISOString() })) return false;
        await recordAudit(tx, {
          at: at.toISOString(),
          request_id: null,
          key_id: null,
          user_id: job.created_by.startsWith('rule:') ? null : job.created_by,
          action: 'routing.send',
          target: `${target} attempt:${job.attempts}${error ? ` error:${error}` : ''}`,
          patient_id: null,
          outcome: status === 'failed' ? 'retrying' : status,
          status_code: null,
        });
        return true;
      });
      if (finished) log.info('routing.send', { job_id: job.public_id, method: job.method, status, attempts: job.attempts });
    } finally {
      release();
    }
  };

  /** Jobs a node that is gone was sending go back to be sent again. */
  const reclaimAbandoned = async (): Promise<void> => {
    const nowMs = clock.now().getTime();
    for (const job of await listRunningSends(db, 100)) {
      if (await isAbandoned(db, node, 'send', job, nowMs)) await requeueSend(db, job.id, { node: job.owner_node, pid: job.owner_pid }, clock.now().toISOString());
    }
  };

  const loop = async (): Promise<number> => {
    let sent = 0;
    await reclaimAbandoned();
    while (!stopped) {
      const job = await claimNextSend(db, node, clock.now().toISOString());
      if (!job) break;
      const task = runJob(job);
      inFlight.add(task);
      try {
        await task;
      } finally {
        inFlight.delete(task);
      }
      sent += 1;
    }
    return sent;
  };

  const runDue = async (): Promise<number> => {
    // One loop at a time per process; a caller arriving meanwhile runs again after it.
    while (looping) await looping.catch(() => 0);
    looping = loop();
    try {
      return await looping;
    } finally {
      looping = undefined;
    }
  };

  const tick = (): void => {
    if (stopped || looping) return;
    void (async () => {
      // A running job of a node that died is not due, so it is looked for on its own schedule.
      if (Date.now() - lastReclaim >= RECLAIM_EVERY_MS) {
        lastReclaim = Date.now();
        await reclaimAbandoned();
      }
      const due = await nextDueAt(db);
      if (due !== undefined && due <= clock.now().toISOString()) await runDue();
    })().catch((err: unknown) => log.error('routing.worker_error', { error: networkError(err) }));
  };

  return {
    start() {
      if (timer || stopped) return;
      timer = setInterval(tick, options.pollMs);
      timer.unref();
      tick();
    },
    runDue,
    async stop() {
      stopped = true;
      if (timer) clearInterval(timer);
      controller.abort();
      while (looping) await looping.catch(() => 0);
      await Promise.allSettled([...inFlight]);
    },
  };
}
