/** Scans, their status, and analysis results (spec 2.3-2.5, 3, 4). */
import type { ApiVersion } from '#common/vocabulary.ts';
import * as api from '#server/api/schemas.ts';
import type { ScanResultV11 } from '#server/api/schemas.ts';
import { scanResultSerializer } from '#server/formats/serializers.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { getLatestResult, getScan, listResults, listScans, requestScanStatus } from '#server/scans/scans.ts';
import { listStudies } from '#server/scans/studies.ts';

/** v1 is exactly spec 2.3-2.5 plus instance_uid and frame (and localization when a finding is not a
 * box); v1.1 adds ids, review, localization and analysis. */
export function resultForVersion(result: ScanResultV11, version: ApiVersion): unknown {
  if (version === 'v1.1') return result;
  return {
    patient_id: result.patient_id,
    scan_id: result.scan_id,
    modality: result.modality,
    findings: result.findings.map((f) => ({
      label: f.label,
      confidence: f.confidence,
      location: f.location,
      instance_uid: f.instance_uid,
      frame: f.frame,
      // A box is what v1 always meant; a whole-image (classifier) finding says it is not one, so a
      // v1 client is not left drawing the image's edges as a lesion.
      ...(f.localization !== undefined && f.localization !== 'box' ? { localization: f.localization } : {}),
    })),
    recommendation: result.recommendation,
  };
}

const resultDescription =
  'Latest analysis per scan. Boxes are in pixels of the referenced image (instance_uid, frame), ' +
  'origin top-left. With label or min_confidence, only scans with a matching finding are listed and ' +
  'only matching findings are shown. API-Version 1.1 adds finding ids, review and the analysis (model) record.';

export const scanRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/scans',
    summary: 'List scans (the worklist)',
    access: scopes('read:scans'),
    query: api.scansQuery,
    response: api.scan,
    list: true,
    audit: 'scans.list',
    sharedAnswer: true,
    handle: async ({ services, query, audit }) => {
      audit({ patientId: query.patient_id ?? null });
      const page = await listScans(services, { patientId: query.patient_id, modality: query.modality, status: query.status }, pageRequest(query));
      return { kind: 'list', items: page.items, nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/studies',
    summary: 'List studies with their series (the worklist by study)',
    description:
      'One item per study (StudyInstanceUID): patient ID and name (PHI: the read is audited with ' +
      'every patient listed), accession, date, description, modalities, its series as in GET /v1/scans, ' +
      'and the most urgent triage of its series. q searches name, patient ID, accession and description.',
    access: scopes('read:scans'),
    query: api.studiesQuery,
    response: api.study,
    list: true,
    audit: 'studies.list',
    sharedAnswer: true,
    handle: async ({ services, query, audit }) => {
      // The search words may be a patient's name: the audit keeps which patients the read
      // reached (its patient_ids), not the name typed.
      const filters: [string, string][] = [];
      if (query.q !== undefined) filters.push(['q', 'redacted']);
      if (query.patient_id !== undefined) filters.push(['patient_id', query.patient_id]);
      audit({ patientId: query.patient_id ?? null, target: filters.length > 0 ? `filter:${new URLSearchParams(filters).toString()}` : null });
      const page = await listStudies(services, { q: query.q, patientId: query.patient_id }, pageRequest(query));
      return { kind: 'list', items: page.items, nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/scans/{scan_id}',
    summary: 'One scan',
    access: scopes('read:scans'),
    params: api.scanIdParam,
    response: api.scan,
    audit: 'scans.read',
    handle: async ({ services, params, audit }) => {
      audit({ target: `scan:${params.scan_id}` });
      const scan = await getScan(services, params.scan_id);
      audit({ patientId: scan.patient_id });
      return { kind: 'data', data: scan };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/scans/{scan_id}',
    summary: 'Change a scan\'s status',
    description:
      'Clients may set queued (analyse again), in_review, reviewed, reported and archived. An unknown or ' +
      'system-only status is 400; a transition not allowed from the current status is 409 and ' +
      'error.details lists the allowed targets.',
    access: scopes('write:scans'),
    params: api.scanIdParam,
    body: api.scanStatusBody,
    response: api.scan,
    audit: 'scans.status',
    handle: async ({ services, params, body, auth, audit }) => {
      audit({ target: `scan:${params.scan_id}` });
      let { scan } = await requestScanStatus(services, params.scan_id, body.status, auth.userId);
      audit({ patientId: scan.patient_id });
      if (scan.status === 'queued') {
        // Queued means "analyse again": the job that runs it is created here.
        await services.analyses.enqueueRequested(params.scan_id, auth.userId);
        scan = await getScan(services, params.scan_id);
      }
      return { kind: 'data', data: scan };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/scan/results',
    summary: 'Analysis results, one per scan',
    description: resultDescription,
    access: scopes('read:scans'),
    query: api.resultsQuery,
    response: api.scanResult,
    list: true,
    formats: ['json', 'csv', 'xml'],
    audit: 'results.list',
    sharedAnswer: true,
    handle: async ({ services, query, version, audit }) => {
      audit({ patientId: query.patient_id ?? null, target: query.scan_id ? `scan:${query.scan_id}` : null });
      const page = await listResults(
        services,
        {
          scanId: query.scan_id,
          patientId: query.patient_id,
          modality: query.modality,
          label: query.label,
          minConfidence: query.min_confidence,
        },
        pageRequest(query),
      );
      return {
        kind: 'list',
        items: page.items.map((item) => resultForVersion(item, version)),
        nextAfterId: page.nextAfterId,
        csv: { serializer: scanResultSerializer, items: page.items },
        xml: scanResultSerializer,
      };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/scans/{scan_id}/results',
    summary: 'The latest analysis result of one scan',
    description: resultDescription,
    access: scopes('read:scans'),
    params: api.scanIdParam,
    response: api.scanResult,
    audit: 'results.read',
    handle: async ({ services, params, version, audit }) => {
      audit({ target: `scan:${params.scan_id}` });
      const result = await getLatestResult(services, params.scan_id);
      audit({ patientId: result.patient_id });
      return { kind: 'data', data: resultForVersion(result, version) };
    },
  }),
];
