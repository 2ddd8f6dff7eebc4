/** Review of AI findings by a radiologist (accept, reject, clear). */
import { z } from 'zod';
import { FINDING_REVIEWS } from '#common/vocabulary.ts';
import * as api from '#server/api/schemas.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { loadModelVocabularies } from '#server/reports/recommendation.ts';
import { reviewFinding } from '#server/scans/finding-review.ts';

const reviewBody = z
  .object({
    review: z.enum(FINDING_REVIEWS).nullable().describe('accepted, rejected, or null to clear the verdict'),
    reason: z.string().trim().min(1).max(500).optional().describe('Why the finding is rejected (with review rejected only); shown in the report and exports'),
  })
  .strict()
  .refine((body) => body.reason === undefined || body.review === 'rejected', { message: 'reason goes with review rejected only' });

export const findingRoutes: Route[] = [
  defineRoute({
    method: 'patch',
    path: '/v1/findings/{id}',
    summary: 'Accept or reject an AI finding (null clears the review)',
    description:
      'Recorded with the reviewer and time, and audited; results with API-Version 1.1 show the review. Draft reports on the ' +
      'finding follow the verdict (findings snapshot and recommendation). A finding of a final report is locked: 409, change ' +
      'it with POST /v1/reports/{id}/addenda.',
    access: scopes('write:reports'),
    params: api.idParam,
    body: reviewBody,
    response: api.findingV11,
    audit: 'findings.review',
    handle: async ({ services, auth, params, body, audit }) => {
      audit({ target: `finding:${params.id}` });
      const vocabularies = await loadModelVocabularies(services.config);
      const reviewed = await reviewFinding(services, vocabularies, { ref: auth.userRef, id: auth.userId }, params.id, body.review, body.reason ?? null);
      audit({ target: `finding:${params.id} scan:${reviewed.scanId} review:${body.review ?? 'cleared'}`, patientId: reviewed.patientId });
      return { kind: 'data', data: reviewed.finding };
    },
  }),
];
