/** Bulk exports for data engineers. */
import * as api from '#server/api/schemas.ts';
import { createExport, exportFile, listExports } from '#server/exports/exports.ts';
import { exportSerializer } from '#server/formats/serializers.ts';
import { CONTENT_TYPE } from '#server/http/format.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';

const readExports = scopes('write:exports', 'read:exports');

export const exportRoutes: Route[] = [
  defineRoute({
    method: 'post',
    path: '/v1/exports',
    summary: 'Create an export of scan results (csv, xml or json), optionally de-identified',
    access: scopes('write:exports'),
    body: api.createExportBody,
    response: api.exportRecord,
    successStatus: 201,
    audit: 'exports.create',
    handle: async ({ services, auth, body, audit }) => {
      const record = await createExport(services, auth, body);
      audit({ target: `export:${record.id}`, patientId: body.filters.patient_id ?? null });
      return { kind: 'data', status: 201, data: record };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/exports',
    summary: 'List exports: your own, or all with read:exports',
    access: readExports,
    query: api.exportsQuery,
    response: api.exportRecord,
    list: true,
    formats: ['json', 'csv', 'xml'],
    audit: 'exports.list',
    handle: async ({ services, auth, query }) => {
      const page = await listExports(services, auth, pageRequest(query));
      return {
        kind: 'list',
        items: page.items,
        nextAfterId: page.nextAfterId,
        csv: { serializer: exportSerializer, items: page.items },
        xml: exportSerializer,
      };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/exports/{id}/download',
    summary: 'Download an export file',
    access: readExports,
    params: api.idParam,
    // The file is in the export's own format.
    produces: ['text/csv', 'application/xml', 'application/json'],
    audit: 'exports.download',
    handle: async ({ services, auth, params, audit }) => {
      audit({ target: `export:${params.id}` });
      const file = await exportFile(services, auth, params.id);
      return { kind: 'file', path: file.path, fileName: file.fileName, contentType: CONTENT_TYPE[file.format] };
    },
  }),
];
