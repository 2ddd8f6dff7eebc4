/** The glossary and the audit trail. */
import * as api from '#server/api/schemas.ts';
import { listAudit } from '#server/audit/audit.ts';
import { glossary } from '#server/analysis/analyses.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { authenticated, defineRoute, scopes, type Route } from '#server/http/route.ts';

export const metaRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/labels',
    summary: 'The label glossary: every label a finding can carry, with definition and code',
    description: 'From the manifests of the installed valid models, the selected model\'s labels first.',
    access: authenticated,
    response: api.label,
    list: true,
    handle: async ({ services }) => ({ kind: 'list', items: await glossary(services), nextAfterId: null }),
  }),
  defineRoute({
    method: 'get',
    path: '/v1/audit',
    summary: 'The audit trail, oldest first (order=newest for the most recent first)',
    access: scopes('read:audit'),
    query: api.auditQuery,
    response: api.auditEvent,
    list: true,
    audit: 'audit.read',
    handle: async ({ services, query }) => {
      // This node's events still being written are part of the trail a caller expects to see.
      await services.audit.flush();
      const page = await listAudit(
        services,
        { action: query.action, userId: query.user_id, patientId: query.patient_id, since: query.since, until: query.until, newestFirst: query.order === 'newest' },
        pageRequest(query),
      );
      return { kind: 'list', items: page.items, nextAfterId: page.nextAfterId };
    },
  }),
];
