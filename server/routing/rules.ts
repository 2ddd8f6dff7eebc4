/**
 * Routing rules (issue 14, item 5): "when an analysis of a CT finishes, send its SR to PACS X",
 * "when a report is finalized, send its SR". A rule names an event, a few conditions, the object
 * to send and a peer; the method follows from the peer's kind (C-STORE to a DICOM node, STOW-RS to
 * a DICOMweb server). Events call `routeEvent` inside their own transaction, so the send jobs are
 * committed with the event or not at all: no catch-up scan is needed after a crash.
 */
import { z } from 'zod';
import { conflict, invalid, notFound } from '#server/errors.ts';
import type { Clock } from '#server/clock.ts';
import type { Database } from '#server/store/database.ts';
import { findPeer, findPeerByName, type PeerRow } from '#server/store/dicom-peers.ts';
import {
  deleteRuleRow,
  findAnalysisFacts,
  findReportAnalysisRef,
  findRule,
  findRuleByName,
  insertRule,
  insertSendJob,
  listEnabledRules,
  listRuleRows,
  updateRuleRow,
  type AnalysisFacts,
  type ObjectKind,
  type RuleFields,
  type RuleRow,
  type SendMethod,
} from '#server/store/routing.ts';

/** More than a site has; rules are read whole for each event. */
export const MAX_RULES = 200;

/** The events a rule can follow: an analysis finished, a report signed, an image stored (by any
 * import: the SCP, STOW-RS, uploads, folders), which forwards it as received. */
export const ROUTED_EVENTS = ['analysis.finished', 'report.finalized', 'instance.received'] as const;

/** What each event can send: an analysis's SR once it finished; a report's SR, or its analysis's;
 * the image itself. The first is the default. */
const OBJECTS_OF: Record<(typeof ROUTED_EVENTS)[number], readonly ObjectKind[]> = {
  'analysis.finished': ['analysis_sr'],
  'report.finalized': ['report_sr', 'analysis_sr'],
  'instance.received': ['instance'],
};

const modality = z.string().regex(/^[A-Z0-9]{1,16}$/, 'a DICOM modality such as CT or MR (upper case)');
const label = z.string().min(1).max(64).regex(/^[a-z0-9_]+$/, 'a finding label such as hemorrhage_detected');

export const ruleConditions = z
  .object({
    /** The scan's modality is one of these; empty or absent: any. */
    modalities: z.array(modality).max(32).optional(),
    /** The analysis ran this model. */
    model_id: z.string().min(1).max(128).optional(),
    /** At least one finding has one of these labels. */
    labels: z.array(label).max(64).optional(),
    /** At least one finding at all (a normal study is not sent). */
    positive_only: z.boolean().optional(),
  })
  .strict();
export type RuleConditions = z.output<typeof ruleConditions>;

const ruleName = z.string().min(1).max(64).regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'letters, digits, space, dot, dash or underscore');

export const ruleBody = z
  .object({
    name: ruleName,
    enabled: z.boolean().default(true),
    event: z.enum(ROUTED_EVENTS),
    /** Defaults to the event's own object: the analysis SR, the report SR, or the image. */
    object: z.enum(['analysis_sr', 'report_sr', 'instance']).optional(),
    conditions: ruleConditions.default({}),
    /** The destination, by peer id or name. */
    peer: z.string().min(1).max(64),
  })
  .strict();
export type RuleBody = z.output<typeof ruleBody>;

export const ruleParams = z.object({ id: z.string().regex(/^rule_[0-9a-f]{24}$/, 'a rule_ id') });

export const rule = z.object({
  id: z.string(),
  name: z.string(),
  enabled: z.boolean(),
  event: z.enum(['analysis.finished', 'report.finalized', 'instance.received']),
  object: z.enum(['analysis_sr', 'report_sr', 'instance']),
  conditions: ruleConditions,
  peer_id: z.string(),
  /** The peer's name now; null when the peer was removed (the rule then sends nothing). */
  peer_name: z.string().nullable(),
  method: z.enum(['c-store', 'stow-rs']).nullable(),
  created_by: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type Rule = z.output<typeof rule>;

export function methodOf(peer: Pick<PeerRow, 'kind'>): SendMethod {
  return peer.kind === 'dimse' ? 'c-store' : 'stow-rs';
}

function conditionsOf(row: RuleRow): RuleConditions {
  // Written by this module only; a row that no longer parses matches nothing rather than all.
  const parsed = ruleConditions.safeParse(JSON.parse(row.conditions));
  return parsed.success ? parsed.data : { modalities: ['\u0000'] };
}

async function toRule(db: Database, row: RuleRow): Promise<Rule> {
  const peer = await findPeer(db, row.peer_id);
  return {
    id: row.public_id,
    name: row.name,
    enabled: Number(row.enabled) === 1,
    event: row.event,
    object: row.object_kind,
    conditions: conditionsOf(row),
    peer_id: row.peer_id,
    peer_name: peer?.name ?? null,
    method: peer ? methodOf(peer) : null,
    created_by: row.created_by,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** A peer named by id (peer_...) or by name. */
export async function resolvePeerRef(db: Database, ref: string): Promise<PeerRow> {
  const row = /^peer_[0-9a-f]{24}$/.test(ref) ? await findPeer(db, ref) : await findPeerByName(db, ref);
  if (!row) throw notFound('Peer', ref);
  return row;
}

async function toFields(db: Database, body: RuleBody): Promise<RuleFields> {
  const object = body.object ?? OBJECTS_OF[body.event][0] ?? 'analysis_sr';
  if (!OBJECTS_OF[body.event].includes(object)) throw invalid(`A rule on ${body.event} cannot send ${object}`, `object: one of ${OBJECTS_OF[body.event].join(', ')}`);
  // An image arriving has a modality but no analysis yet: only modalities can be asked of it.
  const { modalities: _modalities, ...aboutAnalysis } = body.conditions;
  if (body.event === 'instance.received' && Object.keys(aboutAnalysis).length > 0) {
    throw invalid('A rule on instance.received can only ask for modalities', `conditions: ${Object.keys(aboutAnalysis).join(', ')} need an analysis`);
  }
  const peer = await resolvePeerRef(db, body.peer);
  return { name: body.name, enabled: body.enabled, event: body.event, object_kind: object, conditions: JSON.stringify(body.conditions), peer_id: peer.public_id };
}

type Deps = { db: Database; clock: Clock };

export async function listRules(deps: Deps): Promise<Rule[]> {
  const rows = await listRuleRows(deps.db, MAX_RULES);
  const rules: Rule[] = [];
  for (const row of rows) rules.push(await toRule(deps.db, row));
  return rules;
}

export async function getRule(deps: Deps, id: string): Promise<Rule> {
  const row = await findRule(deps.db, id);
  if (!row) throw notFound('Routing rule', id);
  return await toRule(deps.db, row);
}

/** A rule by id or name (the CLI takes either). */
export async function findRuleRef(deps: Deps, ref: string): Promise<Rule> {
  const row = /^rule_[0-9a-f]{24}$/.test(ref) ? await findRule(deps.db, ref) : await findRuleByName(deps.db, ref);
  if (!row) throw notFound('Routing rule', ref);
  return await toRule(deps.db, row);
}

export async function createRule(deps: Deps, body: RuleBody, by: string): Promise<Rule> {
  if (await findRuleByName(deps.db, body.name)) throw conflict('A routing rule with this name exists', `name ${body.name} is taken; choose another or change that rule`);
  if ((await listRuleRows(deps.db, MAX_RULES)).length >= MAX_RULES) throw invalid('Too many routing rules', `at most ${MAX_RULES}`);
  return await toRule(deps.db, await insertRule(deps.db, await toFields(deps.db, body), by, deps.clock.now().toISOString()));
}

export async function updateRule(deps: Deps, id: string, body: RuleBody): Promise<Rule> {
  const row = await findRule(deps.db, id);
  if (!row) throw notFound('Routing rule', id);
  const other = await findRuleByName(deps.db, body.name);
  if (other && other.id !== row.id) throw conflict('A routing rule with this name exists', `name ${body.name} is taken`);
  await updateRuleRow(deps.db, row.id, await toFields(deps.db, body), deps.clock.now().toISOString());
  return await getRule(deps, id);
}

/** Removing a rule keeps the jobs it made (they are the record of what was sent). */
export async function deleteRule(deps: Deps, id: string): Promise<Rule> {
  const row = await findRule(deps.db, id);
  if (!row) throw notFound('Routing rule', id);
  const removed = await toRule(deps.db, row);
  await deleteRuleRow(deps.db, row.id);
  return removed;
}

export function matches(conditions: RuleConditions, facts: AnalysisFacts): boolean {
  if (conditions.modalities && conditions.modalities.length > 0 && !conditions.modalities.includes(facts.modality.toUpperCase())) return false;
  if (conditions.model_id !== undefined && conditions.model_id !== facts.model_id) return false;
  if (conditions.labels && conditions.labels.length > 0 && !conditions.labels.some((l) => facts.labels.includes(l))) return false;
  if (conditions.positive_only === true && facts.labels.length === 0) return false;
  return true;
}

export type RoutedEvent =
  | { event: 'analysis.finished'; analysisRef: number }
  | { event: 'report.finalized'; reportId: string }
  /** The instances one import batch stored (bounded by the batch size). */
  | { event: 'instance.received'; instances: ReadonlyArray<{ sopInstanceUid: string; modality: string }> };

/**
 * Makes a send job for every enabled rule of the event whose conditions hold. Call inside the
 * event's transaction (`db` is its `tx`): database work only, as a transaction may run again.
 * Returns how many jobs were made.
 */
export async function routeEvent(db: Database, routed: RoutedEvent, at: string): Promise<number> {
  if (routed.event === 'instance.received' && routed.instances.length === 0) return 0;
  const rules = await listEnabledRules(db, routed.event, MAX_RULES);
  if (rules.length === 0) return 0;
  if (routed.event === 'instance.received') return await routeInstances(db, rules, routed.instances, at);
  const analysisRef = routed.event === 'analysis.finished' ? routed.analysisRef : (await findReportAnalysisRef(db, routed.reportId))?.analysis_ref ?? null;
  const facts = analysisRef === null ? undefined : await findAnalysisFacts(db, analysisRef);
  let made = 0;
  for (const row of rules) {
    // A report without an analysis (none ran) has no facts; only a rule with no conditions sends it.
    const conditions = conditionsOf(row);
    if (facts ? !matches(conditions, facts) : Object.keys(conditions).length > 0) continue;
    const subject = row.object_kind === 'report_sr' && routed.event === 'report.finalized' ? routed.reportId : facts?.analysis_id;
    if (subject === undefined) continue;
    const peer = await findPeer(db, row.peer_id);
    if (!peer) continue;
    if (await insertSendJob(db, { ruleId: row.public_id, event: routed.event, subject, objectKind: row.object_kind, peerId: peer.public_id, method: methodOf(peer), createdBy: `rule:${row.public_id}`, at })) made += 1;
  }
  return made;
}

async function routeInstances(db: Database, rules: readonly RuleRow[], instances: ReadonlyArray<{ sopInstanceUid: string; modality: string }>, at: string): Promise<number> {
  let made = 0;
  for (const row of rules) {
    const peer = await findPeer(db, row.peer_id);
    if (!peer) continue;
    const modalities = conditionsOf(row).modalities ?? [];
    for (const instance of instances) {
      if (modalities.length > 0 && !modalities.includes(instance.modality.toUpperCase())) continue;
      const job = { ruleId: row.public_id, event: 'instance.received', subject: instance.sopInstanceUid, objectKind: 'instance' as const, peerId: peer.public_id, method: methodOf(peer), createdBy: `rule:${row.public_id}`, at };
      if (await insertSendJob(db, job)) made += 1;
    }
  }
  return made;
}
