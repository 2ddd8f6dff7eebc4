/**
 * The API contract as zod schemas: request bodies and queries are validated with them at the
 * HTTP edge, response types are inferred from them, and the OpenAPI document is generated from
 * them, so the three cannot drift apart.
 */
import { z } from 'zod';
import { measurement } from '#server/api/measurement-schemas.ts';
import { PIXEL_SPACING_SOURCES } from '#common/pixel-spacing.ts';
import {
  EXPORT_FORMATS,
  FINDING_REVIEWS,
  GRANTABLE_SCOPES,
  REPORT_STATUSES,
  ROLES,
  SCAN_STATUSES,
  SCOPES,
  URGENCIES,
  USER_STATUSES,
} from '#common/vocabulary.ts';

// ---- shared pieces ----------------------------------------------------------------------

export const MAX_PAGE_SIZE = 500;

/**
 * A whole-number query parameter with a default. Only plain decimal digits are read: z.coerce
 * (Number()) would also take 0x10 as 16, 1e1, ' 16' and '' as 0. OpenAPI shows an integer (zod
 * leaves out defaults of transformed input, so descriptions state them).
 */
export function queryInteger(range: { min: number; max: number; fallback: number }) {
  return z
    .string()
    .regex(/^\d{1,9}$/, 'expected a whole number in decimal digits (0-9 only)')
    .transform(Number)
    .pipe(z.number().int().min(range.min).max(range.max))
    .default(range.fallback)
    .meta({ type: 'integer', minimum: range.min, maximum: range.max });
}

export const pageQuery = z.object({
  limit: queryInteger({ min: 1, max: MAX_PAGE_SIZE, fallback: 50 }).describe('Items per page (1-500, default 50)'),
  cursor: z.string().min(1).max(200).optional().describe('Opaque cursor from a previous page\'s next_cursor'),
});

export function listOf<T extends z.ZodType>(item: T) {
  return z.object({
    items: z.array(item),
    next_cursor: z.string().nullable().describe('Pass as cursor to get the next page; null on the last page'),
  });
}

const isoTime = z.string().describe('UTC time, ISO 8601');
const dicomUid = z.string().min(1).max(64).regex(/^[0-9.]+$/, 'expected a DICOM UID (digits and dots)');
const text = (max: number) => z.string().max(max);
/** Query parameters arrive as strings; this accepts only a decimal number. */
const queryNumber = z
  .string()
  .regex(/^\d+(\.\d+)?$/, 'expected a number')
  .transform(Number);

export const idParam = z.object({ id: z.string().min(1).max(64) });
export const scanIdParam = z.object({ scan_id: dicomUid });

// ---- identity ---------------------------------------------------------------------------

export const role = z.enum(ROLES);
export const scope = z.enum(SCOPES);
export const grantableScope = z.enum(GRANTABLE_SCOPES);

export const me = z.object({
  user: z.object({
    id: z.string(),
    email: z.string(),
    role,
    scopes: z.array(scope),
  }),
});

export const user = z.object({
  id: z.string(),
  email: z.string(),
  name: z.string().nullable(),
  role,
  status: z.enum(USER_STATUSES),
  created_at: isoTime,
  updated_at: isoTime,
});
export type User = z.infer<typeof user>;

export const usersQuery = pageQuery.extend({
  role: role.optional(),
  status: z.enum(USER_STATUSES).optional(),
}).strict();

/**
 * An email address as hospitals hand them out: intranet domains without a dot
 * (dr.lee@radiology, admin@localhost) and non-ASCII local parts included (RFC 6531).
 */
export const emailAddress = z
  .string()
  .max(254)
  .regex(/^[^\s@]+@[^\s@.][^\s@]*$/, { error: 'expected an email address (name@domain)' });

export const createUserBody = z
  .object({
    email: emailAddress,
    role,
    name: text(200).optional(),
  })
  .strict();

export const updateUserBody = z
  .object({
    role: role.optional(),
    status: z.enum(USER_STATUSES).optional(),
    name: text(200).nullable().optional(),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: 'give at least one of role, status, name' });

export const apiKey = z.object({
  id: z.string(),
  user_id: z.string(),
  name: z.string().nullable(),
  prefix: z.string().describe('The first characters of the key, to tell keys apart'),
  scopes: z.array(scope).describe('Effective scopes: the role\'s defaults plus extra grants'),
  extra_scopes: z.array(grantableScope),
  status: z.enum(['active', 'expiring', 'expired', 'revoked']),
  created_at: isoTime,
  last_used_at: isoTime.nullable(),
  expires_at: isoTime.nullable().describe('Set when the key was rotated: it stops working then'),
  revoked_at: isoTime.nullable(),
  replaced_by: z.string().nullable(),
});
export type ApiKey = z.infer<typeof apiKey>;

export const keysQuery = pageQuery.extend({ user_id: z.string().max(64).optional() }).strict();

export const createKeyBody = z
  .object({
    user_id: z.string().max(64).optional().describe('Whose key; default the caller. Admin only for others'),
    name: text(200).optional(),
    scopes: z.array(grantableScope).max(GRANTABLE_SCOPES.length).optional().describe('Extra scopes; admin only'),
  })
  .strict();

export const issuedKey = z.object({
  api_key: apiKey,
  key: z.string().describe('The key in clear. Shown this once; mia keeps only its digest'),
});

export const rotatedKey = issuedKey.extend({
  previous: z.object({ id: z.string(), expires_at: isoTime.describe('When the old key stops working') }),
});

// ---- scans and results ------------------------------------------------------------------

export const scanStatus = z.enum(SCAN_STATUSES);

export const triage = z
  .object({
    priority: z.enum(URGENCIES).describe('urgent, soon or routine: the most urgent label (its urgency in the manifest the analysis ran with) among findings at or above threshold that no reader rejected'),
    reason: z.string().nullable().describe('The finding behind the priority, e.g. "Intracranial haemorrhage 91%, slice 12 of 30"; null when nothing was found'),
    finding_id: z.string().nullable(),
  })
  .describe('Worklist triage from the latest analysis; null before any analysis');
export type Triage = z.infer<typeof triage>;

export const scan = z.object({
  scan_id: z.string().describe('SeriesInstanceUID'),
  patient_id: z.string(),
  study_uid: z.string(),
  study_date: z.string().nullable(),
  study_description: z.string().nullable(),
  accession_number: z.string().nullable(),
  modality: z.string().describe('DICOM modality code, e.g. MR or CT'),
  body_part: z.string().nullable(),
  description: z.string().nullable(),
  series_number: z.number().nullable(),
  instance_count: z.number().int(),
  status: scanStatus,
  status_reason: z.string().nullable(),
  ai_summary: z
    .object({ label: z.string(), confidence: z.number(), analysis_id: z.string(), review: z.enum(FINDING_REVIEWS).nullable() })
    .nullable()
    .describe('Top finding of the latest analysis, with the reader\'s verdict on it (a rejected one stays the model\'s top finding); null before analysis or when nothing was found'),
  triage: triage.nullable(),
  created_at: isoTime,
  updated_at: isoTime,
});
export type Scan = z.infer<typeof scan>;

/** A study (StudyInstanceUID) with its series: the worklist's study rows (issue 11). */
export const study = z.object({
  study_uid: z.string(),
  patient_id: z.string(),
  patient_name: z.string().nullable().describe('Patient\'s Name (0010,0010) as a DICOM PN value (family^given^middle^prefix^suffix), decoded from the file\'s character set; PHI, audited'),
  accession_number: z.string().nullable(),
  study_date: z.string().nullable(),
  study_description: z.string().nullable(),
  modalities: z.array(z.string()).describe('Distinct modalities of its series'),
  series_count: z.number().int(),
  triage: triage.nullable().describe('The most urgent of its series\' triage; null when none was analysed'),
  series: z.array(scan).describe('Every series of the study, by series number'),
});
export type Study = z.infer<typeof study>;

export const studiesQuery = pageQuery
  .extend({
    q: text(64).optional().describe('Words that must each appear, case- and accent-insensitively, in the patient\'s name, patient ID, accession number or study description'),
    patient_id: text(64).optional(),
  })
  .strict();

/** MRI is accepted as an alias of the DICOM code MR (the spec's example uses it). */
const modalityQuery = z
  .string()
  .max(16)
  .transform((value) => (value.toUpperCase() === 'MRI' ? 'MR' : value.toUpperCase()));

export const scansQuery = pageQuery
  .extend({ patient_id: text(64).optional(), modality: modalityQuery.optional(), status: scanStatus.optional() })
  .strict();

export const scanStatusBody = z.object({ status: z.string().max(40) }).strict();

export const location = z.object({
  x: z.number().describe('Left edge, in pixels of the referenced image'),
  y: z.number().describe('Top edge, in pixels; y grows downwards'),
  width: z.number(),
  height: z.number(),
});

export const finding = z.object({
  label: z.string(),
  confidence: z.number().min(0).max(1),
  location,
  instance_uid: z.string().describe('SOPInstanceUID of the image the box is on'),
  frame: z.number().int().describe('Frame index within that instance, from 0'),
});

export const findingPlace = z
  .object({
    slice: z.number().int().describe("Slice number in the viewer's stack, from 1"),
    slices: z.number().int().describe('Slices in the series'),
    position_mm: z.number().nullable().describe('Image Position (Patient) on the slice normal, mm; null when the image has none'),
    width_mm: z.number().nullable().describe("Box width in mm from the frame's column spacing; null without Pixel Spacing"),
    height_mm: z.number().nullable().describe("Box height in mm from the frame's row spacing; null without Pixel Spacing"),
    spacing_source: z
      .enum(PIXEL_SPACING_SOURCES)
      .optional()
      .describe("Where the spacing of the mm came from (the instance's pixel_spacing_source): imager_pixel_spacing is at the detector. Absent when unknown"),
  })
  .describe("Where the finding is in the reader's terms (server/findings/places.ts)");
export type FindingPlace = z.infer<typeof findingPlace>;

/** v1.1 adds the finding's id and the reviewer's verdict. */
export const findingV11 = finding.extend({
  id: z.string(),
  review: z.enum(FINDING_REVIEWS).nullable(),
  place: findingPlace.nullable().optional().describe('Null when the image is not in the series; absent in reports signed before mia gave sizes'),
  source: z.enum(['model', 'reader']).optional().describe("model: the AI's; reader: drawn by a radiologist (POST /v1/scans/{scan_id}/findings). Absent in reports signed before"),
  review_reason: z.string().nullable().optional().describe('Why the reader rejected it, when they said'),
  review_disputed: z.boolean().optional().describe('Present (true) when verdicts made on different workstations disagree; the review shown is the latest, and a new verdict settles it'),
  threshold: z.number().nullable().optional().describe("The model's decision threshold for the label when it found this (calibrated scale); null for a reader's finding. Absent in reports signed before mia kept it"),
  model_version: z.string().nullable().optional().describe('Version of the model that found it; null for a reader\'s finding'),
  operating_point: z.string().nullable().optional().describe("The model's operating point the threshold came from; null when the model offers none or for a reader's finding"),
});
export type FindingV11 = z.infer<typeof findingV11>;

export const lesion = z
  .object({
    id: z.string().describe('The id of its first finding (lowest slice)'),
    label: z.string(),
    finding_ids: z.array(z.string()).describe('Its findings, by slice'),
    first_slice: z.number().int().nullable(),
    last_slice: z.number().int().nullable(),
    slices: z.number().int().nullable().describe('Slices in the series'),
    largest_diameter_mm: z.number().nullable().describe('Largest in-plane box side over its slices, mm'),
    spacing_source: z.enum(PIXEL_SPACING_SOURCES).optional().describe("Its findings' places' spacing_source: imager_pixel_spacing is at the detector"),
    confidence: z.number(),
    review: z.enum(FINDING_REVIEWS).nullable().describe('accepted if any of its findings is accepted; rejected if all are'),
  })
  .describe('Findings of one lesion: same label, overlapping boxes on neighbouring slices (server/findings/lesions.ts)');
export type Lesion = z.infer<typeof lesion>;

export const scanResult = z.object({
  patient_id: z.string(),
  scan_id: z.string(),
  modality: z.string(),
  findings: z.array(finding),
  recommendation: z.string(),
});

export const analysisSummary = z.object({
  id: z.string(),
  model: z.object({ id: z.string(), name: z.string(), version: z.string(), sha256: z.string() }),
  thresholds: z.record(z.string(), z.number()).optional().describe('Per-label decision thresholds it ran with (calibrated scale)'),
  operating_point: z.string().nullable().optional().describe("The model's operating point the thresholds came from; null when the model offers none"),
  started_at: isoTime.nullable(),
  finished_at: isoTime.nullable(),
});

/** v1.1 adds which analysis (model, version, file hash) produced the result. */
export const scanResultV11 = scanResult.extend({
  findings: z.array(findingV11),
  lesions: z.array(lesion).describe('The findings grouped by lesion; every finding is in one'),
  analysis: analysisSummary,
});
export type ScanResultV11 = z.infer<typeof scanResultV11>;

export const resultsQuery = pageQuery
  .extend({
    scan_id: dicomUid.optional(),
    patient_id: text(64).optional(),
    modality: modalityQuery.optional(),
    label: text(64).optional(),
    min_confidence: queryNumber.pipe(z.number().min(0).max(1)).optional(),
  })
  .strict();

// ---- reports ----------------------------------------------------------------------------

export const findingChange = z.object({
  finding_id: z.string(),
  label: z.string(),
  from: z.enum(FINDING_REVIEWS).nullable(),
  to: z.enum(FINDING_REVIEWS).nullable(),
  added: z.boolean().optional().describe('True for a finding the reader added with this addendum (new_findings)'),
});

export const addendum = z.object({
  id: z.string(),
  author: z.object({ id: z.string(), email: z.string() }),
  created_at: isoTime,
  text: z.string(),
  finding_changes: z.array(findingChange).describe('Finding verdicts this addendum changed (the signed snapshot keeps the old ones)'),
});
export type Addendum = z.infer<typeof addendum>;

export const report = z.object({
  id: z.string(),
  scan_id: z.string(),
  patient_id: z.string(),
  modality: z.string(),
  status: z.enum(REPORT_STATUSES),
  impression: z.string(),
  recommendation: z.string(),
  recommendation_basis: z
    .enum(['model', 'verdicts', 'reader'])
    .describe(
      "model: the AI's own suggestion (no finding reviewed yet); verdicts: built from the accepted findings, per modality (rejected ones never count); reader: written by the reader",
    ),
  findings: z.array(findingV11).describe('Snapshot of the analysis findings with their verdicts, as of the last verdict while a draft; a final report locks them'),
  analysis: z.object({ id: z.string(), model_name: z.string(), model_version: z.string() }).nullable(),
  author: z.object({ id: z.string(), email: z.string() }),
  created_at: isoTime,
  updated_at: isoTime,
  finalized_at: isoTime.nullable(),
  finalized_by: z.string().nullable(),
  addenda: z.array(addendum).describe('Signed sections added after finalizing, oldest first; append-only'),
  lesions: z.array(lesion).describe("The snapshot's findings grouped by lesion"),
  measurements: z
    .array(measurement)
    .describe("The author's measurements on the scan (length, ROI, probe), oldest first; a final report lists those made until it was signed"),
  conflicts: z
    .array(z.object({ field: z.enum(['impression', 'recommendation']), value: z.string(), user_id: z.string().nullable(), user_email: z.string().nullable(), written_at: isoTime }))
    .describe('Draft edits made on another workstation that reached this report after it was signed: never applied, shown so nothing written is lost'),
});
export type Report = z.infer<typeof report>;

export const reportsQuery = pageQuery
  .extend({ scan_id: dicomUid.optional(), patient_id: text(64).optional(), status: z.enum(REPORT_STATUSES).optional() })
  .strict();

export const createReportBody = z.object({ scan_id: dicomUid, impression: text(20_000).optional() }).strict();

export const updateReportBody = z
  .object({
    impression: text(20_000).optional(),
    recommendation: text(20_000).optional(),
    status: z.literal('final').optional().describe('Finalize the report; a final report cannot change'),
  })
  .strict()
  .refine((body) => Object.keys(body).length > 0, { message: 'give at least one of impression, recommendation, status' });

export const readerFindingInput = z
  .object({
    label: z.string().min(1).max(64).describe('A label of the glossary, GET /v1/labels'),
    instance_uid: z.string().min(1).max(64).describe('The image of the scan the box is on'),
    frame: z.number().int().min(0).default(0),
    location: z
      .object({ x: z.number().min(0), y: z.number().min(0), width: z.number().positive(), height: z.number().positive() })
      .strict()
      .describe('The box in pixels of that image, as findings give it'),
  })
  .strict();

export const createAddendumBody = z
  .object({
    text: text(20_000).refine((value) => value.trim() !== '', { message: 'write the addendum text' }),
    findings: z
      .array(z.object({ id: text(64), review: z.enum(FINDING_REVIEWS).nullable() }).strict())
      .max(200)
      .optional()
      .describe("Verdict changes on the report's findings (accepted, rejected, or null to clear) that the addendum records"),
    new_findings: z
      .array(readerFindingInput)
      .max(50)
      .optional()
      .describe('Findings the model missed, drawn by the reader after signing: added accepted (source reader) and recorded in the addendum'),
  })
  .strict();

// ---- exports ----------------------------------------------------------------------------

export const exportFilters = z
  .object({
    scan_id: dicomUid.optional(),
    patient_id: text(64).optional(),
    modality: modalityQuery.optional(),
    label: text(64).optional(),
    min_confidence: z.number().min(0).max(1).optional(),
  })
  .strict();
export type ExportFilters = z.infer<typeof exportFilters>;

export const createExportBody = z
  .object({
    format: z.enum(EXPORT_FORMATS),
    filters: exportFilters.default({}),
    deidentify: z.boolean().default(false).describe('Replace patient ids and UIDs by stable pseudonyms'),
  })
  .strict();

export const exportRecord = z.object({
  id: z.string(),
  format: z.enum(EXPORT_FORMATS),
  filters: exportFilters,
  deidentified: z.boolean(),
  status: z.enum(['ready', 'failed']),
  row_count: z.number().int().describe('Scan results in the file'),
  size_bytes: z.number().int().nullable(),
  sha256: z.string().nullable(),
  created_by: z.string(),
  created_at: isoTime,
  download_url: z.string(),
});
export type ExportRecord = z.infer<typeof exportRecord>;

export const exportsQuery = pageQuery.strict();

// ---- glossary and audit -----------------------------------------------------------------

export const label = z.object({
  label: z.string(),
  display_name: z.string(),
  definition: z.string(),
  code: z.object({ system: z.string(), value: z.string(), meaning: z.string() }).nullable(),
});
export type Label = z.infer<typeof label>;

export const auditEvent = z.object({
  id: z.number().int(),
  at: isoTime,
  request_id: z.string().nullable(),
  key_id: z.string().nullable(),
  user_id: z.string().nullable(),
  action: z.string(),
  target: z.string().nullable(),
  patient_id: z.string().nullable(),
  outcome: z.string(),
  status_code: z.number().int().nullable(),
  patient_ids: z.array(z.string()).describe('Every patient a list read or an export reached (patient_id names a single one)'),
  address: z.string().nullable().describe('The client address, recorded for refused and throttled requests'),
  count: z
    .number()
    .int()
    .min(1)
    .describe('Requests the event stands for: refused and throttled requests are one event per address, action, outcome, route and minute, counted'),
});

export const auditQuery = pageQuery
  .extend({
    action: text(64).optional(),
    user_id: text(64).optional(),
    patient_id: text(64).optional(),
    since: z.iso.datetime().optional(),
    until: z.iso.datetime().optional(),
    order: z.enum(['oldest', 'newest']).default('oldest').describe('newest: most recent events first'),
  })
  .strict();

export const emptyQuery = z.object({}).strict();
