/** Routing rules and their send jobs (admin only): what mia sends to which peer, and how it went. */
import { pageQuery } from '#server/api/schemas.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { createRule, deleteRule, getRule, listRules, rule, ruleBody, ruleParams, updateRule } from '#server/routing/rules.ts';
import {
  analysisSendParams,
  getSendJob,
  listSendJobs,
  manualSendBody,
  retrySend,
  sendAnalysisNow,
  sendJob,
  sendJobParams,
  sendJobQuery,
} from '#server/routing/send-jobs.ts';

const admin = scopes('manage:users');

export const routingRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/dicom/routes',
    summary: 'Routing rules: on an event, send an object to a peer',
    access: admin,
    response: rule,
    list: true,
    audit: 'routing.rules',
    handle: async ({ services }) => ({ kind: 'list', items: await listRules(services), nextAfterId: null }),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/dicom/routes',
    summary: 'Add a routing rule (event, conditions, object, peer)',
    description:
      'event: analysis.finished (sends the analysis SR) or report.finalized (the report SR, or object analysis_sr). ' +
      'conditions: modalities, model_id, labels (any of), positive_only. The method follows the peer: C-STORE to a DICOM node, STOW-RS to a DICOMweb server.',
    access: admin,
    body: ruleBody,
    response: rule,
    successStatus: 201,
    audit: 'routing.rule_create',
    handle: async ({ services, body, auth, audit }) => {
      const created = await createRule(services, body, auth.userId);
      audit({ target: `rule:${created.id}` });
      return { kind: 'data', status: 201, data: created };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/dicom/routes/{id}',
    summary: 'One routing rule',
    access: admin,
    params: ruleParams,
    response: rule,
    audit: 'routing.rule_read',
    handle: async ({ services, params, audit }) => {
      audit({ target: `rule:${params.id}` });
      return { kind: 'data', data: await getRule(services, params.id) };
    },
  }),
  defineRoute({
    method: 'put',
    path: '/v1/dicom/routes/{id}',
    summary: 'Change a routing rule (enable or disable it with enabled)',
    access: admin,
    params: ruleParams,
    body: ruleBody,
    response: rule,
    audit: 'routing.rule_update',
    handle: async ({ services, params, body, audit }) => {
      audit({ target: `rule:${params.id}` });
      return { kind: 'data', data: await updateRule(services, params.id, body) };
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/dicom/routes/{id}',
    summary: 'Remove a routing rule (the jobs it made stay listed)',
    access: admin,
    params: ruleParams,
    response: rule,
    audit: 'routing.rule_delete',
    handle: async ({ services, params, audit }) => {
      audit({ target: `rule:${params.id}` });
      return { kind: 'data', data: await deleteRule(services, params.id) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/dicom/sends',
    summary: 'Send jobs with their status, attempts and last error (oldest first)',
    access: admin,
    query: pageQuery.extend(sendJobQuery.shape),
    response: sendJob,
    list: true,
    audit: 'routing.sends',
    handle: async ({ services, query }) => {
      const page = await listSendJobs(services, pageRequest(query), query.status);
      return { kind: 'list', items: page.items, nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/dicom/sends/{id}',
    summary: 'One send job',
    access: admin,
    params: sendJobParams,
    response: sendJob,
    audit: 'routing.send_read',
    handle: async ({ services, params, audit }) => {
      audit({ target: `send:${params.id}` });
      return { kind: 'data', data: await getSendJob(services, params.id) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/dicom/sends/{id}/retry',
    summary: 'Try a failed or given-up send job again now',
    access: admin,
    params: sendJobParams,
    response: sendJob,
    audit: 'routing.send_retry',
    handle: async ({ services, params, audit }) => {
      audit({ target: `send:${params.id}` });
      return { kind: 'data', data: await retrySend(services, params.id) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/analyses/{id}/send',
    summary: 'Send a finished analysis\'s SR to a peer now, without a rule',
    access: admin,
    params: analysisSendParams,
    body: manualSendBody,
    response: sendJob,
    successStatus: 202,
    audit: 'routing.send_create',
    handle: async ({ services, params, body, auth, audit }) => {
      const job = await sendAnalysisNow(services, params.id, body.peer, auth.userId);
      audit({ target: `send:${job.id} analysis:${params.id}` });
      return { kind: 'data', status: 202, data: job };
    },
  }),
];
