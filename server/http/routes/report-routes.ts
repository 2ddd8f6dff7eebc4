/** Reports (spec 4: GET /reports, with /v1/reports as its versioned twin). */
import * as api from '#server/api/schemas.ts';
import { glossary } from '#server/analysis/analyses.ts';
import { reportSerializer } from '#server/formats/serializers.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { loadModelVocabularies } from '#server/reports/recommendation.ts';
import { addAddendum, draftReport, getReport, listReports, updateReport } from '#server/reports/reports.ts';

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
    handle: async ({ services, query, audit }) => {
      audit({ patientId: query.patient_id ?? null });
      const page = await listReports(services, { scanId: query.scan_id, patientId: query.patient_id, status: query.status }, pageRequest(query));
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
    handle: async ({ services, params, audit }) => {
      audit({ target: `report:${params.id}` });
      const report = await getReport(services, params.id);
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
    description:
      'The recommendation is the model\'s suggestion (recommendation_basis model) until a finding has a verdict; then it is built from ' +
      'the accepted findings, each label with its rule for the scan\'s modality (basis verdicts); rejected findings never drive it.',
    handle: async ({ services, auth, body, audit }) => {
      audit({ target: `scan:${body.scan_id}` });
      const vocabularies = await loadModelVocabularies(services.config);
      const report = await draftReport(services, vocabularies, auth.userRef, { scanId: body.scan_id, impression: body.impression });
      audit({ target: `report:${report.id}`, patientId: report.patient_id });
      return { kind: 'data', status: 201, data: report };
    },
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/reports/{id}',
    summary: 'Edit a draft report, or finalize it with status final',
    description:
      'A final report is immutable: any change is 409 (add an addendum instead). While a draft, its findings snapshot and ' +
      'recommendation follow the verdicts; a recommendation text different from the stored one is the reader\'s own ' +
      '(basis reader) and is kept. Finalizing signs the verdicts as they are then.',
    access: scopes('write:reports'),
    params: api.idParam,
    body: api.updateReportBody,
    response: api.report,
    audit: 'reports.update',
    handle: async ({ services, auth, params, body, audit }) => {
      audit({ target: `report:${params.id}` });
      const vocabularies = await loadModelVocabularies(services.config);
      const report = await updateReport(services, vocabularies, auth.userRef, params.id, body);
      audit({ patientId: report.patient_id });
      return { kind: 'data', data: report };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/reports/{id}/addenda',
    summary: 'Add a signed addendum to a final report',
    description:
      'Appends a section (author = the key\'s user, time, text) to a final report; addenda cannot be changed or removed. ' +
      'Verdict changes listed in findings are applied to the report\'s findings and recorded in the addendum; the signed ' +
      'snapshot keeps the verdicts it was built on. new_findings adds findings the model missed (reader-drawn, accepted), ' +
      'recorded the same way. 409 on a draft (edit it instead).',
    access: scopes('write:reports'),
    params: api.idParam,
    body: api.createAddendumBody,
    response: api.report,
    successStatus: 201,
    audit: 'reports.addendum',
    handle: async ({ services, auth, params, body, audit }) => {
      const changes = (body.findings ?? []).map((f) => `${f.id}:${f.review ?? 'cleared'}`).join(',');
      audit({ target: `report:${params.id}${changes === '' ? '' : ` findings:${changes}`}` });
      const items = (body.new_findings ?? []).map((f) => ({ label: f.label, instanceUid: f.instance_uid, frame: f.frame, ...f.location }));
      const labels = items.length === 0 ? new Set<string>() : new Set((await glossary(services)).map((l) => l.label));
      const report = await addAddendum(services, { ref: auth.userRef, id: auth.userId }, params.id, { text: body.text, findings: body.findings, newFindings: { items, labels } });
      audit({ patientId: report.patient_id });
      return { kind: 'data', status: 201, data: report };
    },
  }),
];
