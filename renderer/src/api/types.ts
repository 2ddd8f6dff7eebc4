/**
 * The API's resource shapes as the renderer sees them. The renderer must not import server code
 * (STYLE.md, Shape), so these mirror server/api/schemas.ts by hand; the shared enums come from
 * common/vocabulary.ts, which imports nothing at run time.
 */
import type {
  ExportFormat,
  FindingLocalization,
  FindingReview,
  GrantableScope,
  ReportStatus,
  Role,
  ScanStatus,
  Scope,
  Urgency,
  UserStatus,
} from '../../../common/vocabulary.ts';
import type { PixelSpacingSource } from '../../../common/pixel-spacing.ts';
import type { RleMask } from '../../../common/rle-mask.ts';

export type Me = { user: { id: string; email: string; role: Role; scopes: Scope[] } };

export type Page<T> = { items: T[]; next_cursor: string | null };

export type User = {
  id: string;
  email: string;
  name: string | null;
  role: Role;
  status: UserStatus;
  created_at: string;
  updated_at: string;
};

export type ApiKey = {
  id: string;
  user_id: string;
  name: string | null;
  prefix: string;
  scopes: Scope[];
  extra_scopes: GrantableScope[];
  status: 'active' | 'expiring' | 'expired' | 'revoked';
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
  replaced_by: string | null;
};

export type IssuedKey = { api_key: ApiKey; key: string };
export type RotatedKey = IssuedKey & { previous: { id: string; expires_at: string } };

export type AiSummary = { label: string; confidence: number; analysis_id: string; review: FindingReview | null };

export type Scan = {
  scan_id: string;
  patient_id: string;
  study_uid: string;
  study_date: string | null;
  study_description: string | null;
  accession_number: string | null;
  modality: string;
  body_part: string | null;
  description: string | null;
  series_number: number | null;
  instance_count: number;
  status: ScanStatus;
  status_reason: string | null;
  ai_summary: AiSummary | null;
  /** From the latest analysis (server/scans/triage.ts); null before any. */
  triage: Triage | null;
  created_at: string;
  updated_at: string;
};

/** How soon a scan needs a reader, from the findings and their labels' urgency in the manifest. */
export type Triage = { priority: Urgency; reason: string | null; finding_id: string | null };

/** GET /v1/studies: a study with its series (patient_name is a DICOM PN value). */
export type Study = {
  study_uid: string;
  patient_id: string;
  patient_name: string | null;
  accession_number: string | null;
  study_date: string | null;
  study_description: string | null;
  modalities: string[];
  series_count: number;
  triage: Triage | null;
  series: Scan[];
};

export type Box = { x: number; y: number; width: number; height: number };

export type Finding = {
  id: string;
  label: string;
  confidence: number;
  location: Box;
  instance_uid: string;
  frame: number;
  review: FindingReview | null;
  /** Slice in the viewer's stack and box size in mm (server/findings/places.ts); null when the image is not in the series. */
  place?: FindingPlace | null;
  /** model: the AI's; reader: drawn by a radiologist. */
  source?: 'model' | 'reader';
  /** Why the reader rejected it, when they said. */
  review_reason?: string | null;
  /** Readers on two workstations recorded different verdicts apart; the one shown is the later. */
  review_disputed?: boolean;
  /** box: location is a lesion's box; image: the whole key image (a slice classifier: no place);
   * region: a segmented region's bounds. Absent (older servers, signed reports): box. */
  localization?: FindingLocalization;
  /** A segmentation model's region on the finding's image; absent for box models. */
  mask?: RleMask;
};

export type FindingPlace = {
  slice: number;
  slices: number;
  position_mm: number | null;
  width_mm: number | null;
  height_mm: number | null;
  /** imager_pixel_spacing: the mm are at the detector ("mm (detector)"); absent when unknown. */
  spacing_source?: PixelSpacingSource;
};

/** Findings of one lesion (same label, overlapping boxes on neighbouring slices), grouped by the server. */
export type Lesion = {
  id: string;
  label: string;
  finding_ids: string[];
  first_slice: number | null;
  last_slice: number | null;
  slices: number | null;
  largest_diameter_mm: number | null;
  spacing_source?: PixelSpacingSource;
  confidence: number;
  review: FindingReview | null;
};

export type AnalysisSummary = {
  id: string;
  model: { id: string; name: string; version: string; sha256: string };
  started_at: string | null;
  finished_at: string | null;
};

export type ScanResult = {
  patient_id: string;
  scan_id: string;
  modality: string;
  findings: Finding[];
  lesions: Lesion[];
  recommendation: string;
  analysis: AnalysisSummary;
};

export type Report = {
  id: string;
  scan_id: string;
  patient_id: string;
  modality: string;
  status: ReportStatus;
  impression: string;
  recommendation: string;
  /** model: the AI's suggestion (nothing reviewed yet); verdicts: from the accepted findings; reader: written by the reader. */
  recommendation_basis: 'model' | 'verdicts' | 'reader';
  findings: Finding[];
  analysis: { id: string; model_name: string; model_version: string } | null;
  author: { id: string; email: string };
  created_at: string;
  updated_at: string;
  finalized_at: string | null;
  finalized_by: string | null;
  addenda: Addendum[];
  lesions: Lesion[];
  /** The author's measurements on the scan (a final report: those made until it was signed). */
  measurements: Measurement[];
  /** Draft edits from another workstation that reached the report after it was signed: never applied. */
  conflicts: ReportConflict[];
};

export type ReportConflict = { field: 'impression' | 'recommendation'; value: string; user_id: string | null; user_email: string | null; written_at: string };

/** A reader's measurement on one frame: points in image pixels (column, row); mm from the frame's pixel spacing. */
export type Measurement = {
  id: string;
  scan_id: string;
  instance_uid: string;
  frame: number;
  kind: 'length' | 'ellipse' | 'rectangle' | 'probe';
  points: Array<[number, number]>;
  length_mm: number | null;
  area_mm2: number | null;
  mean: number | null;
  sd: number | null;
  value: number | null;
  unit: string | null;
  /** imager_pixel_spacing: the mm are at the detector (shown "mm (detector)"); see Instance.pixel_spacing_source. */
  pixel_spacing_source?: PixelSpacingSource | null;
  created_at: string;
};

/** A signed section added to a final report; append-only. */
export type Addendum = {
  id: string;
  author: { id: string; email: string };
  created_at: string;
  text: string;
  finding_changes: Array<{ finding_id: string; label: string; from: FindingReview | null; to: FindingReview | null; added?: boolean }>;
};

export type ExportFilters = {
  scan_id?: string;
  patient_id?: string;
  modality?: string;
  label?: string;
  min_confidence?: number;
};

export type ExportRecord = {
  id: string;
  format: ExportFormat;
  filters: ExportFilters;
  deidentified: boolean;
  status: 'ready' | 'failed';
  row_count: number;
  size_bytes: number | null;
  sha256: string | null;
  created_by: string;
  created_at: string;
  download_url: string;
};

export type Label = {
  label: string;
  display_name: string;
  definition: string;
  code: { system: string; value: string; meaning: string } | null;
};

export type AuditEvent = {
  id: number;
  at: string;
  request_id: string | null;
  key_id: string | null;
  user_id: string | null;
  action: string;
  target: string | null;
  patient_id: string | null;
  outcome: string;
  status_code: number | null;
  /** Every patient a list read or an export reached (patient_id names a single one). */
  patient_ids?: string[];
  /** The client address, for refused and throttled requests. */
  address?: string | null;
  /** Requests the event stands for: refusals are counted per address and minute. */
  count?: number;
};

/** One DICOM instance of a scan, ordered by slice position (GET /v1/scans/{id}/instances). */
export type Instance = {
  instance_uid: string;
  instance_number: number | null;
  position: number | null;
  rows: number;
  columns: number;
  frames: number;
  transfer_syntax: string;
  pixel_spacing: number[] | null;
  /** Where pixel_spacing comes from (PS3.3 10.7.1.1); null without one or for files imported before mia kept it. */
  pixel_spacing_source?: PixelSpacingSource | null;
  photometric: string;
  rescale_slope: number | null;
  rescale_intercept: number | null;
  window_center: number | null;
  window_width: number | null;
  /** Image Orientation (Patient): row then column direction cosines (PS3.3 C.7.6.2.1.1), or null. */
  image_orientation?: [number, number, number, number, number, number] | null;
  /** Each frame's own values (Enhanced multi-frame images); null when frames share the instance's. */
  frame_values?: FrameValue[] | null;
  /** Why the frames' own values could not be read; they are shown with the shared ones. */
  frames_problem?: string | null;
};

/** One frame's own geometry, rescale and window (GET /v1/scans/{id}/instances, frame_values). */
export type FrameValue = {
  position: number | null;
  image_position: number[] | null;
  /** The frame's own Image Orientation (Patient); absent for files imported before it was kept. */
  image_orientation?: [number, number, number, number, number, number] | null;
  pixel_spacing: number[] | null;
  rescale_slope: number;
  rescale_intercept: number;
  window_center: number | null;
  window_width: number | null;
};

export type ImportCounts = {
  /** Files found in the sources; null while still walking. */
  files_total: number | null;
  files_seen: number;
  imported: number;
  duplicates: number;
  conflicts: number;
  rejected: number;
  bytes: number;
};

/** server/api/import-schemas.ts IMPORT_STATUSES: a finished job is `completed`. */
export type ImportStatus = 'running' | 'completed' | 'failed' | 'interrupted';

export type ImportReject = { path: string; reason: string; outcome?: 'rejected' | 'conflict'; sop_instance_uid?: string | null };

export type ImportJob = {
  id: string;
  kind: 'path' | 'upload' | 'watch';
  sources: string[];
  status: ImportStatus;
  counts: ImportCounts;
  rejects: ImportReject[];
  rejects_total: number;
  error: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
};

/** GET /v1/imports lists jobs without their rejects. */
export type ImportJobSummary = Omit<ImportJob, 'rejects'>;

export type ServerEvent = { event: string; data: string; id: string | null };

/** An analysis job (POST /v1/scans/{id}/analyses, GET /v1/analyses/{id}, and the end event of its SSE). */
export type AnalysisJobStatus = 'queued' | 'running' | 'succeeded' | 'failed' | 'not_applicable' | 'cancelled';

export type AnalysisJob = {
  id: string;
  scan_id: string;
  status: AnalysisJobStatus;
  model: { id: string; name: string; version: string; sha256: string };
  thresholds: Record<string, number>;
  progress: { slices_done: number; slices_total: number | null };
  reason: string | null;
  recommendation: string | null;
  findings: number | null;
  requested_by: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
};

/** The data of an analysis `progress` or `queued` event. */
export type AnalysisProgressEvent = { id: string; status: string; slices_done?: number; slices_total?: number | null };

/** An installed model (GET /v1/models); invalid ones carry the reason and are never used. */
export type Model = {
  id: string;
  name: string | null;
  version: string | null;
  sha256: string | null;
  source: 'bundled' | 'user';
  intended_use: string | null;
  not_for_clinical_use: boolean | null;
  applies_to: { modalities: string[]; body_part: string | null; min_slices: number; image_types: string[]; photometric: string[] | null } | null;
  labels: { label: string; display_name: string; definition: string; threshold: number; urgency: Urgency }[];
  metrics: {
    source: string;
    false_positives_per_series: number;
    per_label: Record<string, { sensitivity: number | null; false_positives_per_series: number }>;
    expected_calibration_error: number | null;
    heldout: HeldoutMetrics | null;
  } | null;
  card: ModelCard | null;
  calibration: { method: string; fitted_on: string } | null;
  operating_points: OperatingPoint[];
  operating_point: string | null;
  status: 'ready' | 'invalid';
  error: string | null;
  selected: boolean;
};

/** Sensitivity at "0.25", "0.5", "1", "2" false positives per series. */
export type SensitivityAt = Record<string, number | null>;

export type FrocPoint = { threshold: number; false_positives_per_series: number; sensitivity: number };
export type ReliabilityBin = { low: number; high: number; count: number; mean_confidence: number | null; observed: number | null };

/** Figures on a phantom family the model never trained on (npm run eval). */
export type HeldoutMetrics = {
  family: string;
  series: number;
  lesions: number;
  sensitivity_at: SensitivityAt;
  froc: FrocPoint[];
  reliability: ReliabilityBin[];
  expected_calibration_error: number;
  per_label: Record<string, { lesions: number; sensitivity_at: SensitivityAt }>;
  per_modality: Record<string, { series: number; lesions: number; sensitivity_at: SensitivityAt }>;
};

export type ModelCard = { intended_use: string; users: string | null; training_data: string; limitations: string[]; evaluation: string; references: string[] };

export type OperatingPoint = {
  name: string;
  display_name: string;
  description: string;
  thresholds: Record<string, number>;
  measured: {
    on: string;
    series: number;
    lesions: number;
    sensitivity: number | null;
    false_positives_per_series: number;
    per_label: Record<string, { lesions: number; sensitivity: number | null; false_positives_per_series: number }>;
  } | null;
  selected: boolean;
};

/** GET /v1/sync/status: this workstation's sync with its hub (docs/sync.md). */
export type SyncStatus = {
  linked: boolean;
  hub_url: string | null;
  device_id: string | null;
  device_name: string | null;
  state: 'not_linked' | 'online' | 'offline' | 'syncing';
  pending: number;
  waiting_reason: string | null;
  refused: number;
  last_sync_at: string | null;
  last_attempt_at: string | null;
  last_error: string | null;
};

/** GET /v1/sync/refused: one of this workstation's changes the hub refused for good. */
export type RefusedChange = {
  id: string;
  entity: string;
  key: string;
  reason: string;
  made_at: string;
};

/** GET /v1/devices: a workstation enrolled on this hub (docs/sync.md, Devices). */
export type Device = {
  id: string;
  name: string;
  key_id: string;
  key_prefix: string;
  status: 'active' | 'revoked';
  enrolled_by: string;
  created_at: string;
  last_seen_at: string | null;
  lag: number;
  clock_offset_ms: number | null;
  /** Audit event numbers of the workstation that never reached the hub. */
  audit_gap_events: number;
  revoked_at: string | null;
};

export type EnrolledDevice = { device: Device; key: string };

/** A change the hub kept for an admin instead of merging (GET /v1/sync/quarantine). */
export type QuarantinedChange = {
  id: string;
  device_id: string;
  entity: string;
  key: string;
  reason: string;
  payload: unknown;
  created_at: string;
  resolution: 'released' | 'discarded' | null;
  resolved_by: string | null;
  resolved_at: string | null;
};
