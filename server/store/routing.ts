/** SQL for routing rules and the send jobs they make (migration 26). */
import { perDialect, type Database } from '#server/store/database.ts';
import type { JobOwner, SeenOwner } from '#server/store/analysis-jobs.ts';
import type { PageRequest } from '#server/store/page.ts';
import { newPublicId } from '#server/store/public-id.ts';

export type RoutingEvent = 'analysis.finished' | 'report.finalized' | 'instance.received';
export type ObjectKind = 'analysis_sr' | 'report_sr' | 'instance';
export type SendMethod = 'c-store' | 'stow-rs';
export type SendStatus = 'queued' | 'running' | 'sent' | 'failed' | 'gave_up';

export type RuleRow = {
  id: number;
  public_id: string;
  name: string;
  enabled: number;
  event: RoutingEvent;
  object_kind: ObjectKind;
  /** JSON, parsed by server/routing/rules.ts. */
  conditions: string;
  peer_id: string;
  created_by: string;
  created_at: string;
  updated_at: string;
};

export type RuleFields = { name: string; enabled: boolean; event: RoutingEvent; object_kind: ObjectKind; conditions: string; peer_id: string };

export type SendJobRow = {
  id: number;
  public_id: string;
  rule_id: string | null;
  event: string;
  subject: string;
  object_kind: ObjectKind;
  peer_id: string;
  method: SendMethod;
  status: SendStatus;
  attempts: number;
  next_attempt_at: string | null;
  last_error: string | null;
  sop_instance_uid: string | null;
  owner_node: number | null;
  owner_pid: number | null;
  heartbeat_at: string | null;
  created_by: string;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
};

export type NewSendJob = {
  ruleId: string | null;
  event: string;
  subject: string;
  objectKind: ObjectKind;
  peerId: string;
  method: SendMethod;
  createdBy: string;
  at: string;
};

export async function insertRule(db: Database, fields: RuleFields, by: string, at: string): Promise<RuleRow> {
  const publicId = newPublicId('rule');
  await db.run(
    `INSERT INTO routing_rules (public_id, name, enabled, event, object_kind, conditions, peer_id, created_by, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [publicId, fields.name, fields.enabled ? 1 : 0, fields.event, fields.object_kind, fields.conditions, fields.peer_id, by, at, at],
  );
  return (await findRule(db, publicId)) as RuleRow;
}

export async function updateRuleRow(db: Database, id: number, fields: RuleFields, at: string): Promise<void> {
  await db.run(
    'UPDATE routing_rules SET name = ?, enabled = ?, event = ?, object_kind = ?, conditions = ?, peer_id = ?, updated_at = ? WHERE id = ?',
    [fields.name, fields.enabled ? 1 : 0, fields.event, fields.object_kind, fields.conditions, fields.peer_id, at, id],
  );
}

export async function deleteRuleRow(db: Database, id: number): Promise<void> {
  await db.run('DELETE FROM routing_rules WHERE id = ?', [id]);
}

export async function findRule(db: Database, publicId: string): Promise<RuleRow | undefined> {
  return await db.get<RuleRow>('SELECT * FROM routing_rules WHERE public_id = ?', [publicId]);
}

export async function findRuleByName(db: Database, name: string): Promise<RuleRow | undefined> {
  return await db.get<RuleRow>('SELECT * FROM routing_rules WHERE name = ?', [name]);
}

/** Every rule, by name; a site has a handful (bounded anyway). */
export async function listRuleRows(db: Database, limit: number): Promise<RuleRow[]> {
  return await db.all<RuleRow>('SELECT * FROM routing_rules ORDER BY name LIMIT ?', [limit]);
}

export async function listEnabledRules(db: Database, event: RoutingEvent, limit: number): Promise<RuleRow[]> {
  return await db.all<RuleRow>('SELECT * FROM routing_rules WHERE event = ? AND enabled = 1 ORDER BY id LIMIT ?', [event, limit]);
}

/** What a rule's conditions look at, for an analysis that finished or the analysis a report is on. */
export type AnalysisFacts = { analysis_id: string; modality: string; model_id: string; labels: string[] };

export async function findAnalysisFacts(db: Database, analysisRef: number): Promise<AnalysisFacts | undefined> {
  const row = await db.get<{ public_id: string; modality: string; model_id: string }>(
    'SELECT a.public_id, s.modality, a.model_id FROM analyses a JOIN scans s ON s.id = a.scan_ref WHERE a.id = ?',
    [analysisRef],
  );
  if (!row) return undefined;
  // A model has a handful of labels: DISTINCT keeps this small however many findings there are.
  const labels = await db.all<{ label: string }>('SELECT DISTINCT label FROM findings WHERE analysis_ref = ? ORDER BY label LIMIT 1000', [analysisRef]);
  return { analysis_id: row.public_id, modality: row.modality, model_id: row.model_id, labels: labels.map((l) => l.label) };
}

export async function findAnalysisRef(db: Database, publicId: string): Promise<number | undefined> {
  return (await db.get<{ id: number }>("SELECT id FROM analyses WHERE public_id = ? AND status = 'succeeded'", [publicId]))?.id;
}

export async function findReportAnalysisRef(db: Database, reportPublicId: string): Promise<{ analysis_ref: number | null } | undefined> {
  return await db.get<{ analysis_ref: number | null }>('SELECT analysis_ref FROM reports WHERE public_id = ?', [reportPublicId]);
}

/** A new job, due now; its public id, or undefined when the rule already made one for this
 * subject and object (the event seen again). */
export async function insertSendJob(db: Database, job: NewSendJob): Promise<string | undefined> {
  const publicId = newPublicId('send');
  const changed = await db.run(
    `INSERT INTO send_jobs (public_id, rule_id, event, subject, object_kind, peer_id, method, status, attempts, next_attempt_at, created_by, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?, ?)
     ON CONFLICT (rule_id, subject, object_kind) WHERE rule_id IS NOT NULL DO NOTHING`,
    [publicId, job.ruleId, job.event, job.subject, job.objectKind, job.peerId, job.method, job.at, job.createdBy, job.at],
  );
  return changed === 1 ? publicId : undefined;
}

export async function findSendJob(db: Database, publicId: string): Promise<SendJobRow | undefined> {
  return await db.get<SendJobRow>('SELECT * FROM send_jobs WHERE public_id = ?', [publicId]);
}

export async function findSendJobById(db: Database, id: number): Promise<SendJobRow | undefined> {
  return await db.get<SendJobRow>('SELECT * FROM send_jobs WHERE id = ?', [id]);
}

/** Newest first would shift pages under a busy queue; ids ascend, as every keyset list here. */
export async function listSendJobRows(db: Database, page: PageRequest, status: SendStatus | undefined): Promise<SendJobRow[]> {
  return status === undefined
    ? await db.all<SendJobRow>('SELECT * FROM send_jobs WHERE id > ? ORDER BY id LIMIT ?', [page.afterId, page.limit + 1])
    : await db.all<SendJobRow>('SELECT * FROM send_jobs WHERE status = ? AND id > ? ORDER BY id LIMIT ?', [status, page.afterId, page.limit + 1]);
}

/**
 * Takes the job due first for this node (queued, or failed with its next attempt due) and counts
 * the attempt. On PostgreSQL nodes claiming at once skip each other's rows (FOR UPDATE SKIP LOCKED).
 */
export async function claimNextDueSend(db: Database, owner: JobOwner, at: string): Promise<SendJobRow | undefined> {
  const claimed = await db.get<{ id: number }>(CLAIM_NEXT, [owner.node, owner.pid, at, at, at]);
  return claimed ? await findSendJobById(db, claimed.id) : undefined;
}

const CLAIM_NEXT = perDialect(
  (d) => `UPDATE send_jobs SET status = 'running', owner_node = ?, owner_pid = ?, heartbeat_at = ?, started_at = ?, attempts = attempts + 1
    WHERE id = (SELECT id FROM send_jobs WHERE status IN ('queued', 'failed') AND next_attempt_at <= ?
                ORDER BY next_attempt_at, id LIMIT 1${d === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : ''})
      AND status IN ('queued', 'failed')
    RETURNING id`,
);

/** The runner's last write: conditional on still owning the job, so a job taken over is finished once. */
export async function finishSendJob(
  db: Database,
  id: number,
  owner: JobOwner,
  outcome: { status: 'sent' | 'failed' | 'gave_up'; error: string | null; nextAttemptAt: string | null; sopInstanceUid: string | null; at: string },
): Promise<boolean> {
  const changed = await db.run(
    `UPDATE send_jobs SET status = ?, last_error = ?, next_attempt_at = ?, sop_instance_uid = COALESCE(?, sop_instance_uid),
       finished_at = ?, owner_node = NULL, owner_pid = NULL, heartbeat_at = ?
     WHERE id = ? AND status = 'running' AND owner_node = ? AND owner_pid = ?`,
    [outcome.status, outcome.error, outcome.nextAttemptAt, outcome.sopInstanceUid, outcome.status === 'failed' ? null : outcome.at, outcome.at, id, owner.node, owner.pid],
  );
  return changed === 1;
}

/** Running jobs, for the owner check of the worker (a hub has a few at a time). */
export async function listRunningSends(db: Database, limit: number): Promise<SendJobRow[]> {
  return await db.all<SendJobRow>("SELECT * FROM send_jobs WHERE status = 'running' ORDER BY id LIMIT ?", [limit]);
}

/** A running job whose owner is gone goes back to be tried again now (the attempt is counted). */
export async function requeueSend(db: Database, id: number, seen: SeenOwner, at: string): Promise<boolean> {
  const changed = await db.run(
    `UPDATE send_jobs SET status = 'failed', next_attempt_at = ?, last_error = 'interrupted: the process sending it stopped', owner_node = NULL, owner_pid = NULL, heartbeat_at = ?
     WHERE id = ? AND status = 'running' AND owner_node IS NOT DISTINCT FROM ? AND owner_pid IS NOT DISTINCT FROM ?`,
    [at, at, id, seen.node, seen.pid],
  );
  return changed === 1;
}

/** An admin's retry of a job that failed or gave up: due now, attempts counted afresh. */
export async function retrySendJob(db: Database, id: number, at: string): Promise<boolean> {
  const changed = await db.run(
    `UPDATE send_jobs SET status = 'queued', attempts = 0, next_attempt_at = ?, finished_at = NULL WHERE id = ? AND status IN ('failed', 'gave_up')`,
    [at, id],
  );
  return changed === 1;
}

/** When the next job is due, for the worker's sleep; undefined when none waits. */
export async function nextDueAt(db: Database): Promise<string | undefined> {
  return (await db.get<{ at: string | null }>("SELECT MIN(next_attempt_at) AS at FROM send_jobs WHERE status IN ('queued', 'failed')"))?.at ?? undefined;
}
