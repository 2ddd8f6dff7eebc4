/** Imports: folders and discs on the workstation, DICOM uploads, job status and progress. */
import * as api from '#server/api/import-schemas.ts';
import { MiaError } from '#server/errors.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { getImportJob, importEvents, listImports, startPathImport, storeInstances } from '#server/imports/imports.ts';
import { UPLOAD_LIMIT_BYTES, UPLOAD_TYPES } from '#server/imports/upload.ts';

export const importRoutes: Route[] = [
  defineRoute({
    method: 'post',
    path: '/v1/imports',
    summary: 'Import a file, folder or DICOMDIR disc from this machine',
    description:
      'Starts an import job and answers 202 with it at once; follow it with GET /v1/imports/{id} or its ' +
      'events. Folders are walked recursively; a DICOMDIR imports its disc. Disabled on a hub (403): ' +
      'send instances with POST /v1/instances there.',
    access: scopes('write:scans'),
    body: api.createImportBody,
    response: api.importJob,
    successStatus: 202,
    audit: 'imports.create',
    handle: async ({ services, body, auth, audit }) => {
      const job = await startPathImport(services, body.path, auth.userId);
      audit({ target: `import:${job.id}` });
      return { kind: 'data', data: job, status: 202 };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/imports',
    summary: 'List import jobs, newest first',
    access: scopes('read:scans'),
    query: api.importsQuery,
    response: api.importJobSummary,
    list: true,
    audit: 'imports.list',
    handle: async ({ services, query }) => {
      const page = await listImports(services, { status: query.status }, pageRequest(query));
      return { kind: 'list', items: page.items, nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/imports/{id}',
    summary: 'One import job: status, counts and rejected files with reasons',
    access: scopes('read:scans'),
    params: api.importIdParam,
    response: api.importJob,
    audit: 'imports.read',
    handle: async ({ services, params, audit }) => {
      audit({ target: `import:${params.id}` });
      return { kind: 'data', data: await getImportJob(services, params.id) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/imports/{id}/events',
    summary: 'Progress of an import job as Server-Sent Events',
    description:
      'text/event-stream with events progress ({id, status, counts}), reject ({path, reason, outcome, ' +
      'sop_instance_uid}) and done (the job without rejects), after which the stream ends. Send the ' +
      'Authorization header (read it with fetch streaming; EventSource cannot send headers).',
    access: scopes('read:scans'),
    params: api.importIdParam,
    produces: 'text/event-stream',
    audit: 'imports.events',
    handle: async ({ services, params, audit }) => {
      audit({ target: `import:${params.id}` });
      return { kind: 'events', run: await importEvents(services, params.id) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/instances',
    summary: 'Store DICOM instances (STOW-RS style upload)',
    description:
      'Body: one instance as application/dicom, or several as multipart/related; type="application/dicom". ' +
      'Answers with the outcome of each part (imported, duplicate, conflict, rejected with a reason). A single ' +
      'file that is not a storable DICOM image is 422 with the reason in error.details; a multipart body is 422 ' +
      'only when no part was stored. Bodies above 2 GiB, and multipart bodies of more than 1,000 parts (the ' +
      'default limit), are 413 with the limit in error.details; send more parts in further requests.',
    access: scopes('write:scans'),
    upload: { contentTypes: UPLOAD_TYPES, maxBytes: UPLOAD_LIMIT_BYTES },
    response: api.storeInstancesResult,
    audit: 'instances.store',
    handle: async ({ services, upload, auth, audit }) => {
      if (!upload) throw new MiaError('internal', 'upload route without a body');
      const result = await storeInstances(services, upload, auth.userId);
      audit({ target: `import:${result.job_id}` });
      return { kind: 'data', data: result };
    },
  }),
];
