/**
 * Search a PACS or DICOMweb server and retrieve from it into the archive (issue 14, item 2). A
 * reader searches (read:scans) and picks the peer from /v1/dicom/sources, which shows names only;
 * retrieving stores studies, so it is write:scans like an import.
 */
import * as api from '#server/api/query-retrieve-schemas.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { getRetrieve, listRetrieves, startRetrieve } from '#server/query-retrieve/retrieves.ts';
import { searchPeer } from '#server/query-retrieve/search.ts';
import { listSources } from '#server/query-retrieve/sources.ts';

export const queryRetrieveRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/dicom/sources',
    summary: 'The PACS and DICOMweb servers a reader may search: id, name and kind only',
    access: scopes('read:scans'),
    response: api.dicomSource,
    list: true,
    handle: async ({ services }) => ({ kind: 'list', items: await listSources(services), nextAfterId: null }),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/dicom/query',
    summary: 'Search a peer at patient, study or series level (C-FIND or QIDO-RS)',
    description:
      'Filters: patient_name and patient_id (wildcards * and ?), study_date_from/study_date_to (YYYY-MM-DD), ' +
      'modality, accession, study_uid (required at series level; patient level matches name and ID only). ' +
      'At most `limit` results; `capped` says more matched. A peer that cannot be reached, rejects the ' +
      'association or refuses the query is 422 naming the reason.',
    access: scopes('read:scans'),
    body: api.queryBody,
    response: api.queryResult,
    audit: 'dicom.query',
    handle: async ({ services, body, audit }) => {
      const result = await searchPeer(services, body);
      const patientIds = [...new Set(result.items.flatMap((i) => (i.level === 'series' ? [] : [i.patient_id])))];
      audit({ target: `peer:${result.source.id}`, patientIds });
      return { kind: 'data', data: result };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/dicom/retrieve',
    summary: "Retrieve a study, a series or a patient's priors from a peer into the archive",
    description:
      'Answers 202 with the retrieve record once the peer has listed what to fetch; follow it with GET ' +
      '/v1/dicom/retrieves/{id}. From a DICOM node by C-MOVE to mia\'s own AE title (mia must run its DICOM ' +
      'listener, and the node must know its AE title, host and port), from a DICOMweb server by WADO-RS. A ' +
      'study or series the peer does not have gives a record that is failed from the start, naming it.',
    access: scopes('write:scans'),
    body: api.retrieveBody,
    response: api.retrieveRecord,
    successStatus: 202,
    audit: 'dicom.retrieve',
    handle: async ({ services, body, auth, audit }) => {
      const listener = services.dicomListener();
      const record = await startRetrieve(services, services.retrieves, body, auth.userId, listener ? { aeTitle: listener.aeTitle, port: listener.port } : null);
      audit({ target: `retrieve:${record.id}`, patientId: record.target.patient_id });
      return { kind: 'data', data: record, status: 202 };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/dicom/retrieves',
    summary: 'Retrieves, newest first, with their progress',
    access: scopes('read:scans'),
    query: api.retrievesQuery,
    response: api.retrieveRecord,
    list: true,
    audit: 'dicom.retrieves',
    handle: async ({ services, query, audit }) => {
      const page = await listRetrieves(services, { status: query.status }, pageRequest(query));
      audit({ patientIds: [...new Set(page.items.flatMap((r) => (r.target.patient_id ? [r.target.patient_id] : [])))] });
      return { kind: 'list', items: page.items, nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/dicom/retrieves/{id}',
    summary: 'One retrieve: status, each study\'s progress and sub-operation counts, its import jobs, errors',
    access: scopes('read:scans'),
    params: api.retrieveParams,
    response: api.retrieveRecord,
    audit: 'dicom.retrieve_read',
    handle: async ({ services, params, audit }) => {
      const record = await getRetrieve(services, params.id);
      audit({ target: `retrieve:${record.id}`, patientId: record.target.patient_id });
      return { kind: 'data', data: record };
    },
  }),
];
