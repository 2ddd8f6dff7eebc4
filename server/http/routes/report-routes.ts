/** Reports (spec 4: GET /reports, with /v1/reports as its versioned twin). */
import * as api from '#server/api/schemas.ts';
import { reportSerializer } from '#server/formats/serializers.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { draftReport, getReport, listReports, updateReport } from '#server/reports/reports.ts';

export const reportRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/reports',
    aliases: ['/reports'],
    summary: 'List reports',
    access: scopes('read:reports'),
    query: api.reportsQuery,
    response: api.report,
    list: true,
    formats: ['json', 'csv', 'xml'],
    audit: 'reports.list',
    handle: ({ services, query, audit }) => {
      audit({ patientId: query.patient_id ?? null });
      const page = listReports(services, { scanId: query.scan_id, patientId: query.patient_id, status: query.status }, pageRequest(query));
      return {
        kind: 'list',
        items: page.items,
        nextAfterId: page.nextAfterId,
        csv: { serializer: reportSerializer, items: page.items },
        xml: reportSerializer,
      };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/reports/{id}',
    summary: 'One report',
    access: scopes('read:reports'),
    params: api.idParam,
    response: api.report,
    audit: 'reports.read',
    handle: ({ services, params, audit }) => {
      audit({ target: `report:${params.id}` });
      const report = getReport(services, params.id);
      audit({ patientId: report.patient_id });
      return { kind: 'data', data: report };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/reports',
    summary: 'Draft a report from a scan\'s latest analysis',
    access: scopes('write:reports'),
    body: api.createReportBody,
    response: api.report,
    successStatus: 201,
    audit: 'reports.create',
    handle: ({ services, auth, body, audit }) => {
      audit({ target: `scan:${body.scan_id}` });
      const report = draftReport(services, auth.userRef, { scanId: body.scan_id, impression: body.impression });
      audit({ target: `report:${report.id}`, patientId: report.patient_id });
      return { kind: 'data', status: 201, data: report };
    },
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/reports/{id}',
    summary: 'Edit a draft report, or finalize it with status final',
    description: 'A final report is immutable: any change is 409.',
    access: scopes('write:reports'),
    params: api.idParam,
    body: api.updateReportBody,
    response: api.report,
    audit: 'reports.update',
    handle: ({ services, auth, params, body, audit }) => {
      audit({ target: `report:${params.id}` });
      const report = updateReport(services, auth.userRef, params.id, body);
      audit({ patientId: report.patient_id });
      return { kind: 'data', data: report };
    },
  }),
];
