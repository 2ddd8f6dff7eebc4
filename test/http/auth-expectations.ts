/**
 * Who may call what, written by hand from the spec (5.1, 7.1) and PRODUCT.md (Access), not read
 * from the route table: the auth matrix compares the server against this, so loosening or
 * tightening a route's scope in the server fails it (issue 12). Change a row only when the product
 * decision changes, and say why in the commit.
 *
 * Each row: the scopes that let a caller through, any one of them (null: any valid key), the roles whose default keys are let
 * through, and whether a key in its 24 h rotation grace period is refused (managing keys and users
 * needs the current key, docs/security.md).
 */
import type { GrantableScope, Role, Scope } from '#common/vocabulary.ts';

/** `scope`: what a 403 names as required, the scopes that let a caller through, any one of them. */
export type Expectation = { scope: readonly Scope[] | null; roles: readonly Role[]; currentKeyOnly: boolean };

const R = 'radiologist';
const D = 'data_engineer';
const A = 'admin';

const any = (currentKeyOnly = false): Expectation => ({ scope: null, roles: [R, D, A], currentKeyOnly });
const needs = (scope: Scope | readonly Scope[], roles: readonly Role[], currentKeyOnly = false): Expectation => ({
  scope: typeof scope === 'string' ? [scope] : scope,
  roles,
  currentKeyOnly,
});

export const EXPECTED: Readonly<Record<string, Expectation>> = {
  // Every key sees itself, its own keys, the models, the label glossary and the API description.
  'GET /v1/auth/me': any(),
  'GET /v1/auth/keys': any(),
  'POST /v1/auth/keys': any(true),
  'POST /v1/auth/keys/{id}/rotate': any(true),
  'DELETE /v1/auth/keys/{id}': any(true),
  'GET /v1/models': any(),
  'GET /v1/labels': any(),
  'GET /v1/openapi.json': any(),

  // Sync: device keys only (mia devices enroll); no person's key, an admin's included.
  'GET /v1/sync/hello': needs('sync:pull', []),
  'GET /v1/sync/directory': needs('sync:pull', []),
  'POST /v1/sync/push': needs('sync:push', []),
  'POST /v1/sync/audit': needs('sync:push', []),
  'GET /v1/sync/pull': needs('sync:pull', []),
  'GET /v1/sync/pull/live': needs('sync:pull', []),
  'POST /v1/sync/blobs/missing': needs('sync:push', []),
  'PUT /v1/sync/blobs/{sha256}': needs('sync:push', []),
  'POST /v1/sync/blobs': needs('sync:push', []),
  'GET /v1/sync/blobs/{sha256}': needs('sync:pull', []),
  'GET /v1/sync/blobs/{sha256}/upload': needs('sync:push', []),
  'GET /v1/sync/digest': needs('sync:pull', []),
  // A workstation's own sync state and a round on demand: anyone who reads the worklist.
  'GET /v1/sync/status': needs('read:scans', [R, D, A]),
  'POST /v1/sync/run': needs('read:scans', [R, D, A]),
  // Enrolling and revoking workstations: the admin's, with the current key (it mints a key).
  'GET /v1/devices': needs('manage:users', [A]),
  'POST /v1/sync/quarantine/{change_id}/release': needs('manage:users', [A]),
  'POST /v1/sync/quarantine/{change_id}/discard': needs('manage:users', [A]),
  'GET /v1/sync/assigned': needs('sync:pull', []),
  'GET /v1/sync/assignments': needs('manage:users', [A]),
  'POST /v1/sync/assignments': needs('manage:users', [A]),
  'DELETE /v1/sync/assignments/{id}': needs('manage:users', [A]),
  // Searching the PACS is reading (issue 14): every role, and the peers to choose from by name
  // only; retrieving stores studies, like an import.
  'GET /v1/dicom/sources': needs('read:scans', [R, D, A]),
  'POST /v1/dicom/query': needs('read:scans', [R, D, A]),
  'GET /v1/dicom/retrieves': needs('read:scans', [R, D, A]),
  'GET /v1/dicom/retrieves/{id}': needs('read:scans', [R, D, A]),
  'POST /v1/dicom/retrieve': needs('write:scans', [A]),
  'GET /v1/dicom/peers': needs('manage:users', [A]),
  'POST /v1/dicom/peers': needs('manage:users', [A]),
  'GET /v1/dicom/peers/{id}': needs('manage:users', [A]),
  'PUT /v1/dicom/peers/{id}': needs('manage:users', [A]),
  'DELETE /v1/dicom/peers/{id}': needs('manage:users', [A]),
  // Routing sends patient data to other systems: the same admins who name the peers.
  'GET /v1/dicom/routes': needs('manage:users', [A]),
  'POST /v1/dicom/routes': needs('manage:users', [A]),
  'GET /v1/dicom/routes/{id}': needs('manage:users', [A]),
  'PUT /v1/dicom/routes/{id}': needs('manage:users', [A]),
  'DELETE /v1/dicom/routes/{id}': needs('manage:users', [A]),
  'GET /v1/dicom/sends': needs('manage:users', [A]),
  'GET /v1/dicom/sends/{id}': needs('manage:users', [A]),
  'POST /v1/dicom/sends/{id}/retry': needs('manage:users', [A]),
  'POST /v1/analyses/{id}/send': needs('manage:users', [A]),
  'GET /v1/sync/quarantine': needs('manage:users', [A]),
  // A workstation's changes the hub refused, and sending one again: the admin's.
  'GET /v1/sync/refused': needs('manage:users', [A]),
  'POST /v1/sync/refused/{change_id}/send-again': needs('manage:users', [A]),
  'POST /v1/devices': needs('manage:users', [A], true),
  'DELETE /v1/devices/{device_id}': needs('manage:users', [A], true),

  // Users and the site's model choice: the admin's.
  'GET /v1/users': needs('manage:users', [A]),
  'POST /v1/users': needs('manage:users', [A], true),
  'GET /v1/users/{id}': needs('manage:users', [A]),
  'PATCH /v1/users/{id}': needs('manage:users', [A], true),
  'POST /v1/models/{id}/select': needs('manage:users', [A]),
  'POST /v1/models/{id}/operating-point': needs('manage:users', [A]),

  // Reading scans, images and results: every role (spec 5.1 examples give read:scans to both).
  'GET /v1/scans': needs('read:scans', [R, D, A]),
  'GET /v1/studies': needs('read:scans', [R, D, A]),
  'GET /v1/scans/{scan_id}': needs('read:scans', [R, D, A]),
  'GET /v1/scan/results': needs('read:scans', [R, D, A]),
  'GET /v1/scans/{scan_id}/results': needs('read:scans', [R, D, A]),
  'GET /v1/scans/{scan_id}/instances': needs('read:scans', [R, D, A]),
  'GET /v1/instances/{instance_uid}/frames/{frame}/rendered': needs('read:scans', [R, D, A]),
  'GET /v1/instances/{instance_uid}/frames/{frame}/raw': needs('read:scans', [R, D, A]),
  'GET /v1/instances/{instance_uid}/tags': needs('read:scans', [R, D, A]),
  'GET /v1/scans/{scan_id}/thumbnail': needs('read:scans', [R, D, A]),
  'GET /v1/scans/{scan_id}/measurements': needs('read:scans', [R, D, A]),
  'GET /v1/imports': needs('read:scans', [R, D, A]),
  'GET /v1/imports/{id}': needs('read:scans', [R, D, A]),
  'GET /v1/imports/{id}/events': needs('read:scans', [R, D, A]),
  'GET /v1/analyses/{id}': needs('read:scans', [R, D, A]),
  'GET /v1/analyses/{id}/events': needs('read:scans', [R, D, A]),
  // An AI result as a DICOM SR is the analysis itself in another format: whoever reads the analysis.
  'GET /v1/analyses/{id}/sr': needs('read:scans', [R, D, A]),
  // DICOMweb reads are the same reads as /v1's (issue 14): every role.
  'GET /dicom-web/studies': needs('read:scans', [R, D, A]),
  'GET /dicom-web/series': needs('read:scans', [R, D, A]),
  'GET /dicom-web/instances': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/series': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/instances': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/series/{series}/instances': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/series/{series}': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/series/{series}/instances/{instance}': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/metadata': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/series/{series}/metadata': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/series/{series}/instances/{instance}/metadata': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/series/{series}/instances/{instance}/frames/{frames}': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/series/{series}/instances/{instance}/rendered': needs('read:scans', [R, D, A]),
  'GET /dicom-web/studies/{study}/series/{series}/instances/{instance}/frames/{frame}/rendered': needs('read:scans', [R, D, A]),

  // Changing what is stored and analysed: write:scans, granted by an admin (spec 5.1's example
  // rule: a radiologist's status update is 403).
  'POST /v1/scans/{scan_id}': needs('write:scans', [A]),
  'POST /v1/imports': needs('write:scans', [A]),
  'POST /v1/instances': needs('write:scans', [A]),
  // STOW-RS is POST /v1/instances under its standard path.
  'POST /dicom-web/studies': needs('write:scans', [A]),
  'POST /dicom-web/studies/{study}': needs('write:scans', [A]),
  'POST /v1/scans/{scan_id}/analyses': needs('write:scans', [A]),
  'DELETE /v1/analyses/{id}': needs('write:scans', [A]),

  // The radiologist's work: verdicts, reader findings, measurements, reports (PRODUCT.md, Access).
  'PATCH /v1/findings/{id}': needs('write:reports', [R, A]),
  'POST /v1/scans/{scan_id}/findings': needs('write:reports', [R, A]),
  'POST /v1/scans/{scan_id}/measurements': needs('write:reports', [R, A]),
  'PATCH /v1/measurements/{id}': needs('write:reports', [R, A]),
  'DELETE /v1/measurements/{id}': needs('write:reports', [R, A]),
  'GET /v1/reports': needs('read:reports', [R, A]),
  'GET /reports': needs('read:reports', [R, A]),
  'GET /v1/reports/{id}': needs('read:reports', [R, A]),
  'GET /v1/reports/{id}/sr': needs('read:reports', [R, A]),
  'POST /v1/reports': needs('write:reports', [R, A]),
  'PATCH /v1/reports/{id}': needs('write:reports', [R, A]),
  'POST /v1/reports/{id}/addenda': needs('write:reports', [R, A]),

  // Exports: the data engineer's (read:exports lets an admin-granted key list and download).
  'POST /v1/exports': needs('write:exports', [D, A]),
  'GET /v1/exports': needs(['write:exports', 'read:exports'], [D, A]),
  'GET /v1/exports/{id}/download': needs(['write:exports', 'read:exports'], [D, A]),

  // The audit trail: an admin, or a key granted read:audit.
  'GET /v1/audit': needs('read:audit', [A]),
};

/**
 * Keys with an admin's extra grant (PRODUCT.md, Access): each opens exactly these routes beyond
 * its role's defaults.
 */
export const GRANTS: readonly { role: Role; scope: GrantableScope; opens: readonly string[] }[] = [
  {
    role: R,
    scope: 'write:scans',
    opens: [
      'POST /v1/scans/{scan_id}', 'POST /v1/imports', 'POST /v1/instances', 'POST /v1/scans/{scan_id}/analyses', 'DELETE /v1/analyses/{id}',
      'POST /dicom-web/studies', 'POST /dicom-web/studies/{study}',
      'POST /v1/dicom/retrieve',
    ],
  },
  { role: R, scope: 'read:exports', opens: ['GET /v1/exports', 'GET /v1/exports/{id}/download'] },
  { role: R, scope: 'read:audit', opens: ['GET /v1/audit'] },
  {
    role: D,
    scope: 'write:reports',
    opens: ['PATCH /v1/findings/{id}', 'POST /v1/scans/{scan_id}/findings', 'POST /v1/scans/{scan_id}/measurements', 'PATCH /v1/measurements/{id}', 'DELETE /v1/measurements/{id}', 'POST /v1/reports', 'PATCH /v1/reports/{id}', 'POST /v1/reports/{id}/addenda'],
  },
];
