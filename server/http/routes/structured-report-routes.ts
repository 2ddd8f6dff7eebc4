/** AI results and signed reports as DICOM Structured Reports (issue 14, item 4). */
import { analysisIdParam } from '#server/api/analysis-schemas.ts';
import { idParam } from '#server/api/schemas.ts';
import { writeAnalysisSr, writeReportSr, type WrittenSr } from '#server/dicom-sr/structured-reports.ts';
import { defineRoute, scopes, type HandlerResult, type Route } from '#server/http/route.ts';

function dicomFile(sr: WrittenSr): HandlerResult {
  return {
    kind: 'binary',
    contentType: 'application/dicom',
    body: sr.bytes,
    // Patient data: no shared or stored copies on the way.
    headers: { 'Content-Disposition': `attachment; filename="${sr.fileName}"`, 'X-SOP-Instance-UID': sr.sopInstanceUid, 'Cache-Control': 'no-store' },
  };
}

export const structuredReportRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/analyses/{id}/sr',
    summary: 'A finished analysis as a DICOM Structured Report (TID 1500 Measurement Report)',
    description:
      'A Comprehensive SR Part 10 file (Explicit VR Little Endian) in a new series of the scan\'s study: the model as ' +
      'device observer and algorithm (name, version, file SHA-256), and per finding its coded label, confidence ' +
      '(Certainty of Finding, 0-1), box as a closed POLYLINE on its image and frame, and the reader\'s verdict. Written ' +
      'from what is stored: the same analysis gives the same bytes and SOP Instance UID; a new verdict gives a new ' +
      'instance. 409 for an analysis that has not succeeded, or whose images are not stored here.',
    access: scopes('read:scans'),
    params: analysisIdParam,
    produces: 'application/dicom',
    audit: 'analyses.sr',
    handle: async ({ services, params, audit }) => {
      audit({ target: `analysis:${params.id}` });
      const sr = await writeAnalysisSr(services, params.id);
      audit({ target: `analysis:${params.id} sr:${sr.sopInstanceUid}`, patientId: sr.patientId });
      return dicomFile(sr);
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/reports/{id}/sr',
    summary: 'A signed report as a DICOM Structured Report (Basic Text SR)',
    description:
      'A Basic Text SR (TID 2000) Part 10 file: findings as signed, impression, recommendation and every addendum, ' +
      'signer and addendum authors as verifying observers (VERIFIED, COMPLETE), referencing the scan\'s images and ' +
      'the AI result SR (GET /v1/analyses/{id}/sr) by its SOP Instance UID. 409 for a draft.',
    access: scopes('read:reports'),
    params: idParam,
    produces: 'application/dicom',
    audit: 'reports.sr',
    handle: async ({ services, params, audit }) => {
      audit({ target: `report:${params.id}` });
      const sr = await writeReportSr(services, params.id);
      audit({ target: `report:${params.id} sr:${sr.sopInstanceUid}`, patientId: sr.patientId });
      return dicomFile(sr);
    },
  }),
];
