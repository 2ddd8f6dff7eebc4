/** Installed models, the active model, and analysis jobs with their progress. */
import * as api from '#server/api/analysis-schemas.ts';
import { scanIdParam } from '#server/api/schemas.ts';
import { analysisEvents, cancelAnalysis, chooseOperatingPoint, getAnalysis, listModels, requestAnalysis, selectModel } from '#server/analysis/analyses.ts';
import { authenticated, defineRoute, scopes, type Route } from '#server/http/route.ts';

export const analysisRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/models',
    summary: 'Installed analysis models, valid or not, and which one is selected',
    description:
      'Bundled models and model folders (ONNX + manifest.json) dropped into the data folder\'s models/. A model ' +
      'whose manifest does not validate or whose file does not match its SHA-256 is listed as invalid with the ' +
      'reason (naming the manifest field) and is never used.',
    access: authenticated,
    response: api.model,
    list: true,
    audit: 'models.list',
    handle: async ({ services }) => ({ kind: 'list', items: await listModels(services), nextAfterId: null }),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/models/{id}/select',
    summary: 'Select the model new analyses use (admin)',
    description: 'Persists the choice for this installation. 409 for an installed but invalid model.',
    access: scopes('manage:users'),
    params: api.modelIdParam,
    response: api.model,
    audit: 'models.select',
    handle: async ({ services, params, audit }) => {
      audit({ target: `model:${params.id}` });
      return { kind: 'data', data: await selectModel(services, params.id) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/models/{id}/operating-point',
    summary: "Choose the site's operating point for a model (admin)",
    description:
      "A model may offer named operating points: per-label thresholds chosen on held-out data, each with the " +
      'sensitivity and false positives per series it gave there (GET /v1/models). The choice holds for this ' +
      'installation; analyses queued from now on use its thresholds and record its name. 400 naming the points ' +
      'the model offers for an unknown name; 409 for an invalid model.',
    access: scopes('manage:users'),
    params: api.modelIdParam,
    body: api.operatingPointBody,
    response: api.model,
    audit: 'models.operating_point',
    handle: async ({ services, params, body, audit }) => {
      audit({ target: `model:${params.id}` });
      return { kind: 'data', data: await chooseOperatingPoint(services, params.id, body.name) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/scans/{scan_id}/analyses',
    summary: 'Analyse a scan (queue an analysis job)',
    description:
      'Answers 202 with the queued job; follow it with GET /v1/analyses/{id} or its events. The scan goes ' +
      'queued -> analyzing -> analyzed, or failed with the reason in status_reason; a scan the model does not ' +
      'apply to (modality, body part, slice count, image type) gets a not_applicable job and goes back to ' +
      'received (or analyzed, when an earlier result stands). 409 while the scan has a queued or running ' +
      'analysis, or when its status does not allow analysis (e.g. in_review).',
    access: scopes('write:scans'),
    params: scanIdParam,
    body: api.createAnalysisBody,
    response: api.analysisJob,
    successStatus: 202,
    audit: 'analyses.create',
    handle: async ({ services, params, body, auth, audit }) => {
      audit({ target: `scan:${params.scan_id}` });
      const { job, patientId } = await requestAnalysis(services, params.scan_id, body.model_id, auth.userId);
      audit({ target: `analysis:${job.id}`, patientId });
      return { kind: 'data', data: job, status: 202 };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/analyses/{id}',
    summary: 'One analysis job: status, progress, model and thresholds, reason',
    access: scopes('read:scans'),
    params: api.analysisIdParam,
    response: api.analysisJob,
    audit: 'analyses.read',
    handle: async ({ services, params, audit }) => {
      audit({ target: `analysis:${params.id}` });
      const { job, patientId } = await getAnalysis(services, params.id);
      audit({ patientId });
      return { kind: 'data', data: job };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/analyses/{id}/events',
    summary: 'Progress of an analysis job as Server-Sent Events',
    description:
      'text/event-stream with events queued ({id, status}) while waiting, progress ({id, status, slices_done, ' +
      'slices_total}) after each batch, then one of done, failed, not_applicable or cancelled carrying the job, ' +
      'after which the stream ends. Send the Authorization header (fetch streaming; EventSource cannot).',
    access: scopes('read:scans'),
    params: api.analysisIdParam,
    produces: 'text/event-stream',
    audit: 'analyses.events',
    handle: async ({ services, params, audit }) => {
      audit({ target: `analysis:${params.id}` });
      return { kind: 'events', run: await analysisEvents(services, params.id) };
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/analyses/{id}',
    summary: 'Cancel an analysis job',
    description:
      'A queued job is cancelled at once, a running one at its next batch; the scan goes back to received (or ' +
      'analyzed, when an earlier result stands). A finished job is returned unchanged.',
    access: scopes('write:scans'),
    params: api.analysisIdParam,
    response: api.analysisJob,
    audit: 'analyses.cancel',
    handle: async ({ services, params, audit }) => {
      audit({ target: `analysis:${params.id}` });
      const { job, patientId } = await cancelAnalysis(services, params.id);
      audit({ patientId });
      return { kind: 'data', data: job };
    },
  }),
];
