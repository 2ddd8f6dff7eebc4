/**
 * Vocabulary shared by the server and the renderer. Types and constant tuples only: this folder
 * imports nothing at run time, so the renderer can use it without pulling in server code.
 */

export const ROLES = ['radiologist', 'data_engineer', 'admin'] as const;
export type Role = (typeof ROLES)[number];

/** Scopes a key can hold. `manage:users` is implied by `*` only and cannot be granted alone. */
export const SCOPES = [
  'read:scans',
  'write:scans',
  'read:reports',
  'write:reports',
  'read:exports',
  'write:exports',
  'read:audit',
  'manage:users',
  // A workstation's device key (docs/sync.md): only these two, never granted to a person's key.
  'sync:push',
  'sync:pull',
  '*',
] as const;
export type Scope = (typeof SCOPES)[number];

/** Scopes an admin may add to a key on top of its role's defaults (PRODUCT.md, Access). */
export const GRANTABLE_SCOPES = ['write:scans', 'write:reports', 'read:exports', 'read:audit'] as const;
export type GrantableScope = (typeof GRANTABLE_SCOPES)[number];

export const SCAN_STATUSES = [
  'received',
  'queued',
  'analyzing',
  'analyzed',
  'failed',
  'in_review',
  'reviewed',
  'reported',
  'archived',
] as const;
export type ScanStatus = (typeof SCAN_STATUSES)[number];

/** The states a client may request; the others are set by the system (PRODUCT.md, Scan states). */
export const CLIENT_SCAN_STATUSES = ['queued', 'in_review', 'reviewed', 'reported', 'archived'] as const;
export type ClientScanStatus = (typeof CLIENT_SCAN_STATUSES)[number];

export const USER_STATUSES = ['active', 'disabled'] as const;
export type UserStatus = (typeof USER_STATUSES)[number];

export const REPORT_STATUSES = ['draft', 'final'] as const;
export type ReportStatus = (typeof REPORT_STATUSES)[number];

export const EXPORT_FORMATS = ['csv', 'xml', 'json'] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const FINDING_REVIEWS = ['accepted', 'rejected'] as const;
export type FindingReview = (typeof FINDING_REVIEWS)[number];

/** What a finding's location is: a lesion's box, the whole key image (a slice classifier's
 * finding: no place on the image), or the bounding box of a segmented region. */
export const FINDING_LOCALIZATIONS = ['box', 'image', 'region'] as const;
export type FindingLocalization = (typeof FINDING_LOCALIZATIONS)[number];

export const API_VERSIONS = ['v1', 'v1.1'] as const;
export type ApiVersion = (typeof API_VERSIONS)[number];

/**
 * How soon a finding of a label needs a reader (the manifest's `urgency`), most urgent first:
 * the worklist's triage priority. A scan with no finding at or above threshold is routine.
 */
export const URGENCIES = ['urgent', 'soon', 'routine'] as const;
export type Urgency = (typeof URGENCIES)[number];
