/**
 * `mia routes add|list|enable|disable|remove|jobs|retry|send`: routing rules and their send jobs
 * without the admin screen, as the API's /v1/dicom/routes and /v1/dicom/sends do them (the same
 * validation; changes audited as "cli"). `send` sends the jobs due now in this process, for a
 * folder no server runs on.
 */
import { recordAudit } from '#server/audit/audit.ts';
import { systemClock } from '#server/clock.ts';
import { formatTable } from '#server/cli/table.ts';
import type { ServerConfigInput } from '#server/config.ts';
import { openDataFolder } from '#server/data-folder.ts';
import { MiaError } from '#server/errors.ts';
import { createRule, deleteRule, findRuleRef, listRules, ruleBody, updateRule, type Rule } from '#server/routing/rules.ts';
import { listSendJobs, retrySend, SEND_STATUSES } from '#server/routing/send-jobs.ts';
import { createRuntime } from '#server/runtime.ts';
import type { Database } from '#server/store/database.ts';
import type { SendStatus } from '#server/store/routing.ts';

export type RoutesIo = { out(line: string): void; err(line: string): void };
export type RoutesOptions = {
  event?: string | undefined;
  peer?: string | undefined;
  modality?: string | undefined;
  labels?: string | undefined;
  model?: string | undefined;
  object?: string | undefined;
  positiveOnly?: boolean | undefined;
  disabled?: boolean | undefined;
  status?: string | undefined;
};
type Place = { dataDir: string; databaseUrl: string | null };

const fail = (message: string): never => {
  throw new MiaError('invalid', message);
};

const list = (text: string | undefined): string[] | undefined => (text === undefined ? undefined : text.split(',').map((s) => s.trim()).filter((s) => s !== ''));

/** The rule as `add` describes it, through the API's schema so the CLI refuses what the API does. */
function bodyOf(name: string, options: RoutesOptions): ReturnType<typeof ruleBody.parse> {
  const conditions: Record<string, unknown> = {};
  const modalities = list(options.modality);
  if (modalities) conditions['modalities'] = modalities;
  const labels = list(options.labels);
  if (labels) conditions['labels'] = labels;
  if (options.model !== undefined) conditions['model_id'] = options.model;
  if (options.positiveOnly) conditions['positive_only'] = true;
  const parsed = ruleBody.safeParse({
    name,
    enabled: options.disabled !== true,
    event: options.event ?? fail('routes add: --event analysis.finished|report.finalized|instance.received is required'),
    ...(options.object === undefined ? {} : { object: options.object }),
    conditions,
    peer: options.peer ?? fail('routes add: --peer NAME (a DICOM peer, see GET /v1/dicom/peers) is required'),
  });
  if (!parsed.success) fail(`routes add: ${parsed.error.issues.map((i) => `${i.path.join('.') || 'rule'}: ${i.message}`).join('; ')}`);
  return parsed.data as ReturnType<typeof ruleBody.parse>;
}

function describeConditions(rule: Rule): string {
  const c = rule.conditions;
  const parts = [
    c.modalities?.length ? `modality ${c.modalities.join('/')}` : '',
    c.model_id ? `model ${c.model_id}` : '',
    c.labels?.length ? `label ${c.labels.join('/')}` : '',
    c.positive_only ? 'positive' : '',
  ].filter((p) => p !== '');
  return parts.length > 0 ? parts.join(', ') : 'always';
}

async function audited(db: Database, action: string, target: string): Promise<void> {
  await recordAudit(db, { at: systemClock.now().toISOString(), request_id: null, key_id: 'cli', user_id: 'cli', action, target, patient_id: null, outcome: 'success', status_code: null });
}

export async function routesCommand(sub: string | undefined, args: readonly string[], options: RoutesOptions, place: Place, io: RoutesIo, config: Omit<ServerConfigInput, 'dataDir'> = {}): Promise<number> {
  if (sub === 'send') {
    // The runtime without background work: its worker sends what is due, then the process ends.
    const runtime = await createRuntime({ logToStderr: false, ...config, databaseUrl: place.databaseUrl, clock: systemClock, dataDir: place.dataDir }, { background: false });
    try {
      const sent = await runtime.routing.runDue();
      io.out(`${sent} send job${sent === 1 ? '' : 's'} tried (mia routes jobs shows how each went)`);
      return 0;
    } finally {
      await runtime.stop();
    }
  }
  const folder = await openDataFolder(place.dataDir, { databaseUrl: place.databaseUrl });
  const deps = { db: folder.db, clock: systemClock };
  const one = (what: string): string => {
    const [ref, ...extra] = args;
    if (ref === undefined || extra.length > 0) fail(`routes ${sub ?? ''}: expected exactly one ${what}`);
    return ref as string;
  };
  try {
    switch (sub) {
      case 'add': {
        const created = await createRule(deps, bodyOf(one('rule name'), options), 'cli');
        await audited(folder.db, 'routing.rule_create', `rule:${created.id}`);
        io.out(`${created.id}: ${created.name}: on ${created.event} send ${created.object} to ${created.peer_name ?? created.peer_id} by ${created.method ?? '?'} (${describeConditions(created)})`);
        return 0;
      }
      case 'list': {
        const rules = await listRules(deps);
        io.out(formatTable(
          ['ID', 'NAME', 'ON', 'WHEN', 'SENDS', 'TO', 'BY', 'ENABLED'],
          rules.map((r) => [r.id, r.name, r.event, describeConditions(r), r.object, r.peer_name ?? `${r.peer_id} (removed)`, r.method ?? '-', r.enabled ? 'yes' : 'no']),
        ));
        return 0;
      }
      case 'enable':
      case 'disable': {
        const rule = await findRuleRef(deps, one('rule (id or name)'));
        const updated = await updateRule(deps, rule.id, {
          name: rule.name,
          enabled: sub === 'enable',
          event: rule.event,
          object: rule.object,
          conditions: rule.conditions,
          peer: rule.peer_id,
        });
        await audited(folder.db, 'routing.rule_update', `rule:${updated.id}`);
        io.out(`${updated.name}: ${updated.enabled ? 'enabled' : 'disabled'}`);
        return 0;
      }
      case 'remove': {
        const rule = await findRuleRef(deps, one('rule (id or name)'));
        await deleteRule(deps, rule.id);
        await audited(folder.db, 'routing.rule_delete', `rule:${rule.id}`);
        io.out(`${rule.name}: removed (its send jobs stay listed)`);
        return 0;
      }
      case 'jobs': {
        const status = options.status === undefined ? undefined : SEND_STATUSES.find((s) => s === options.status) ?? fail(`routes jobs: --status is one of ${SEND_STATUSES.join(', ')}`);
        const rows = [];
        let afterId = 0;
        // Paged through, so a long history is read in bounded pieces.
        for (;;) {
          const page = await listSendJobs(deps, { afterId, limit: 500 }, status as SendStatus | undefined);
          rows.push(...page.items);
          if (page.nextAfterId === null) break;
          afterId = page.nextAfterId;
        }
        io.out(formatTable(
          ['ID', 'STATUS', 'ATTEMPTS', 'SENDS', 'SUBJECT', 'PEER', 'BY', 'NEXT', 'LAST ERROR'],
          rows.map((j) => [j.id, j.status, String(j.attempts), j.object, j.subject, j.peer_id, j.method, j.next_attempt_at ?? '', j.last_error ?? '']),
        ));
        return 0;
      }
      case 'retry': {
        const job = await retrySend(deps, one('send job id'));
        await audited(folder.db, 'routing.send_retry', `send:${job.id}`);
        io.out(`${job.id}: queued again (a running server sends it, or mia routes send)`);
        return 0;
      }
      default:
        return fail('routes: expected add, list, enable, disable, remove, jobs, retry or send');
    }
  } finally {
    await folder.close();
  }
}
