/** Send jobs as people see them: listed with their outcome, retried by an admin, made by hand. */
import { z } from 'zod';
import type { Clock } from '#server/clock.ts';
import { conflict, notFound } from '#server/errors.ts';
import type { Database } from '#server/store/database.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';
import { findAnalysisRef, findSendJob, insertSendJob, listSendJobRows, retrySendJob, type SendJobRow, type SendStatus } from '#server/store/routing.ts';
import { methodOf, resolvePeerRef } from '#server/routing/rules.ts';

export const SEND_STATUSES = ['queued', 'running', 'sent', 'failed', 'gave_up'] as const;

export const sendJob = z.object({
  id: z.string(),
  rule_id: z.string().nullable(),
  event: z.string(),
  /** The analysis (ana_...), report (rpt_...) or instance (SOP Instance UID) the job sends. */
  subject: z.string(),
  object: z.enum(['analysis_sr', 'report_sr', 'instance']),
  peer_id: z.string(),
  method: z.enum(['c-store', 'stow-rs']),
  status: z.enum(SEND_STATUSES),
  attempts: z.number().int(),
  next_attempt_at: z.string().nullable(),
  /** The peer's refusal or the network error of the last attempt; never patient data. */
  last_error: z.string().nullable(),
  sop_instance_uid: z.string().nullable(),
  created_by: z.string(),
  created_at: z.string(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
});
export type SendJob = z.output<typeof sendJob>;

export const sendJobParams = z.object({ id: z.string().regex(/^send_[0-9a-f]{24}$/, 'a send_ id') });
export const sendJobQuery = z.object({ status: z.enum(SEND_STATUSES).optional() });
export const analysisSendParams = z.object({ id: z.string().regex(/^ana_[0-9a-f]{24}$/, 'an ana_ id') });
export const manualSendBody = z.object({ peer: z.string().min(1).max(64) }).strict();

export function toSendJob(row: SendJobRow): SendJob {
  return {
    id: row.public_id,
    rule_id: row.rule_id,
    event: row.event,
    subject: row.subject,
    object: row.object_kind,
    peer_id: row.peer_id,
    method: row.method,
    status: row.status,
    attempts: Number(row.attempts),
    next_attempt_at: row.next_attempt_at,
    last_error: row.last_error,
    sop_instance_uid: row.sop_instance_uid,
    created_by: row.created_by,
    created_at: row.created_at,
    started_at: row.started_at,
    finished_at: row.finished_at,
  };
}

type Deps = { db: Database; clock: Clock };

export async function listSendJobs(deps: Deps, page: PageRequest, status?: SendStatus): Promise<Page<SendJob>> {
  const result = toPage(await listSendJobRows(deps.db, page, status), page.limit);
  return { items: result.items.map(toSendJob), nextAfterId: result.nextAfterId };
}

export async function getSendJob(deps: Deps, id: string): Promise<SendJob> {
  const row = await findSendJob(deps.db, id);
  if (!row) throw notFound('Send job', id);
  return toSendJob(row);
}

/** Makes a job that failed or gave up due now, with its attempts counted afresh. */
export async function retrySend(deps: Deps, id: string): Promise<SendJob> {
  const row = await findSendJob(deps.db, id);
  if (!row) throw notFound('Send job', id);
  if (!await retrySendJob(deps.db, row.id, deps.clock.now().toISOString())) {
    throw conflict(`This send job is ${row.status}`, 'only a failed or gave_up job can be retried; a queued or running one is under way, a sent one is done');
  }
  return await getSendJob(deps, id);
}

/** A send of an analysis's SR that no rule made (POST /v1/analyses/{id}/send). */
export async function sendAnalysisNow(deps: Deps, analysisId: string, peerRef: string, by: string): Promise<SendJob> {
  const id = await deps.db.transaction(async (tx) => {
    if (await findAnalysisRef(tx, analysisId) === undefined) throw notFound('Finished analysis', analysisId);
    const peer = await resolvePeerRef(tx, peerRef);
    const at = deps.clock.now().toISOString();
    return await insertSendJob(tx, { ruleId: null, event: 'manual', subject: analysisId, objectKind: 'analysis_sr', peerId: peer.public_id, method: methodOf(peer), createdBy: by, at });
  });
  if (id === undefined) throw conflict('The send job was not made', 'try again');
  return await getSendJob(deps, id);
}
