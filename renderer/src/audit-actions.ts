/**
 * The audit actions the server records, for the Audit screen's filter: one per route of the
 * route table (server/http/routes/*.ts, `audit:`) plus auth.failure, written for refused keys,
 * and requests.throttled, for requests over the rate limit (server/http/app.ts). The renderer
 * may not import server code, so the list is kept here and
 * test/renderer/audit-view.test.ts checks it against the route table.
 */
export const AUDIT_ACTIONS = [
  'analyses.cancel',
  'analyses.create',
  'analyses.events',
  'analyses.read',
  'audit.read',
  'auth.failure',
  'devices.enroll',
  'dicom.peer_create',
  'dicom.peer_delete',
  'dicom.peer_read',
  'dicom.peer_update',
  'dicom.peers',
  'devices.list',
  'devices.revoke',
  'exports.create',
  'exports.download',
  'exports.list',
  'findings.add',
  'findings.review',
  'imports.create',
  'imports.events',
  'imports.list',
  'imports.read',
  'instances.list',
  'instances.raw',
  'instances.rendered',
  'instances.store',
  'instances.tags',
  'keys.create',
  'keys.list',
  'keys.revoke',
  'keys.rotate',
  'measurements.create',
  'measurements.delete',
  'measurements.list',
  'measurements.update',
  'models.list',
  'models.select',
  'reports.addendum',
  'reports.create',
  'reports.list',
  'reports.read',
  'reports.update',
  'requests.throttled',
  'results.list',
  'results.read',
  'scans.list',
  'scans.read',
  'scans.status',
  'scans.thumbnail',
  'studies.list',
  'sync.assign',
  'sync.assignments',
  'sync.audit',
  'sync.blob',
  'sync.blob_read',
  'sync.blobs',
  'sync.directory',
  'sync.pull',
  'sync.push',
  'sync.quarantine',
  'sync.quarantine_discard',
  'sync.quarantine_release',
  'sync.run',
  'sync.unassign',
  'users.create',
  'users.list',
  'users.read',
  'users.update',
] as const;

export type ReviewVerdict = 'accepted' | 'rejected' | 'cleared';

/** findings.review targets end with " review:accepted|rejected|cleared" (finding-routes.ts). */
export function reviewVerdict(target: string | null): ReviewVerdict | null {
  const match = target ? / review:(accepted|rejected|cleared)$/.exec(target) : null;
  const verdict = match?.[1];
  return verdict === 'accepted' || verdict === 'rejected' || verdict === 'cleared' ? verdict : null;
}
