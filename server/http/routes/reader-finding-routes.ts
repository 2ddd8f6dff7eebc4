/** Findings drawn by the reader (issue 11): what the model missed, with a glossary label. */
import { z } from 'zod';
import { glossary } from '#server/analysis/analyses.ts';
import * as api from '#server/api/schemas.ts';
import { addReaderFinding } from '#server/findings/reader-findings.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { loadModelVocabularies } from '#server/reports/recommendation.ts';

const readerFindingBody = api.readerFindingInput.extend({ source: z.literal('reader').describe('Who made it: only readers add findings') }).strict();

export const readerFindingRoutes: Route[] = [
  defineRoute({
    method: 'post',
    path: '/v1/scans/{scan_id}/findings',
    summary: 'Add a finding the model missed (source reader): a box on one image and a glossary label',
    description:
      "Joins the scan's latest analysis, accepted by its author: results, drafts and their recommendation include it. 409 " +
      'without an analysis, or once a final report is built on it (write an addendum instead).',
    access: scopes('write:reports'),
    params: api.scanIdParam,
    body: readerFindingBody,
    response: api.findingV11,
    successStatus: 201,
    audit: 'findings.add',
    handle: async ({ services, auth, params, body, audit }) => {
      audit({ target: `scan:${params.scan_id}` });
      const [vocabularies, labels] = await Promise.all([loadModelVocabularies(services.config), glossary(services)]);
      const added = await addReaderFinding(services, vocabularies, new Set(labels.map((l) => l.label)), auth.userRef, params.scan_id, {
        label: body.label,
        instanceUid: body.instance_uid,
        frame: body.frame,
        ...body.location,
      });
      audit({ target: `finding:${added.finding.id} scan:${params.scan_id} label:${body.label}`, patientId: added.patientId });
      return { kind: 'data', status: 201, data: added.finding };
    },
  }),
];
