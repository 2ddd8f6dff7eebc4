/** The API contract of imports, uploads and image access (zod; OpenAPI is generated from it). */
import { z } from 'zod';
import { queryInteger } from '#server/api/schemas.ts';
import { PIXEL_SPACING_SOURCES } from '#common/pixel-spacing.ts';

const isoTime = z.string().describe('UTC time, ISO 8601');
const dicomUid = z.string().min(1).max(64).regex(/^[0-9.]+$/, 'expected a DICOM UID (digits and dots)');

export const IMPORT_STATUSES = ['running', 'completed', 'failed', 'interrupted'] as const;

export const importCounts = z.object({
  files_total: z.number().int().nullable().describe('Files found in the sources; null while still walking'),
  files_seen: z.number().int(),
  imported: z.number().int(),
  duplicates: z.number().int().describe('Same SOP Instance UID and same bytes as already stored: skipped'),
  conflicts: z.number().int().describe('Same SOP Instance UID, different bytes: the first stays, listed in rejects'),
  rejected: z.number().int(),
  bytes: z.number().int(),
});

export const importReject = z.object({
  path: z.string(),
  reason: z.string(),
  outcome: z.enum(['rejected', 'conflict']),
  sop_instance_uid: z.string().nullable(),
});

export const importJob = z.object({
  id: z.string(),
  kind: z.enum(['path', 'upload', 'watch']),
  sources: z.array(z.string()),
  status: z
    .enum(IMPORT_STATUSES)
    .describe(
      'interrupted: the process running it stopped (crash, kill, shutdown). A path job with finished_at null ' +
        'resumes from its checkpoint when the same import runs again or the server next starts; an upload is sent again',
    ),
  counts: importCounts,
  rejects: z.array(importReject).describe('Rejected and conflicting files, oldest first, at most 500'),
  rejects_total: z.number().int(),
  error: z.string().nullable(),
  created_at: isoTime,
  updated_at: isoTime,
  finished_at: isoTime.nullable(),
});
export type ImportJob = z.infer<typeof importJob>;

/** The list shows counts, not rejects. */
export const importJobSummary = importJob.omit({ rejects: true });

export const createImportBody = z
  .object({
    path: z
      .string()
      .min(1)
      .max(4096)
      .refine((p) => p.startsWith('/') || /^[A-Za-z]:[\\/]/.test(p), 'expected an absolute path on this machine')
      .describe('A file, folder (walked recursively) or DICOMDIR on the machine running mia'),
  })
  .strict();

export const importsQuery = z
  .object({
    limit: queryInteger({ min: 1, max: 500, fallback: 50 }).describe('Items per page (1-500, default 50)'),
    cursor: z.string().min(1).max(200).optional(),
    status: z.enum(IMPORT_STATUSES).optional(),
  })
  .strict();

export const importIdParam = z.object({ id: z.string().min(1).max(64) });

export const instanceOutcome = z.object({
  part: z.number().int().describe('1 for a single application/dicom body; the part number for multipart'),
  outcome: z.enum(['imported', 'duplicate', 'conflict', 'rejected']),
  sop_instance_uid: z.string().nullable(),
  scan_id: z.string().nullable(),
  reason: z.string().nullable(),
});

export const storeInstancesResult = z.object({
  job_id: z.string(),
  counts: importCounts,
  outcomes: z.array(instanceOutcome),
});

// ---- image access ------------------------------------------------------------------------

export const MAX_INSTANCE_PAGE = 2000;

export const instancesQuery = z
  .object({
    limit: queryInteger({ min: 1, max: MAX_INSTANCE_PAGE, fallback: 500 }).describe('Items per page (1-2000, default 500)'),
    cursor: z.string().min(1).max(200).optional(),
  })
  .strict();

export const frameValue = z.object({
  position: z.number().nullable().describe("The frame's Image Position (Patient) projected on its slice normal, mm"),
  image_position: z.tuple([z.number(), z.number(), z.number()]).nullable().describe('Image Position (Patient) of the frame, mm'),
  image_orientation: z
    .tuple([z.number(), z.number(), z.number(), z.number(), z.number(), z.number()])
    .nullable()
    .optional()
    .describe("Image Orientation (Patient) of the frame (its Plane Orientation item, else the shared one); absent for files imported before mia kept it"),
  pixel_spacing: z.tuple([z.number(), z.number()]).nullable().describe('[row spacing, column spacing] in mm'),
  rescale_slope: z.number(),
  rescale_intercept: z.number(),
  window_center: z.number().nullable(),
  window_width: z.number().nullable(),
});
export type FrameValue = z.infer<typeof frameValue>;

export const instance = z.object({
  instance_uid: z.string(),
  instance_number: z.number().int().nullable(),
  position: z.number().nullable().describe('Image Position (Patient) projected on the slice normal, mm'),
  rows: z.number().int(),
  columns: z.number().int(),
  frames: z.number().int(),
  transfer_syntax: z.string(),
  pixel_spacing: z
    .tuple([z.number(), z.number()])
    .nullable()
    .describe(
      '[row spacing, column spacing] in mm: Pixel Spacing, else Imager Pixel Spacing (detector plane, CR/DX/MG), divided by the ' +
        'Estimated Radiographic Magnification Factor when present; draw by their ratio',
    ),
  pixel_spacing_source: z
    .enum(PIXEL_SPACING_SOURCES)
    .nullable()
    .optional()
    .describe(
      'Where pixel_spacing comes from (PS3.3 10.7.1.1): pixel_spacing (in the patient), imager_pixel_spacing (at the detector: ' +
        'sizes include the geometric magnification), imager_corrected_by_magnification (detector spacing / (0018,1114), an ' +
        'estimate at the patient), calibrated (Pixel Spacing differs from Imager Pixel Spacing, or a Pixel Spacing Calibration ' +
        'Type is given). Null without a spacing, or for files imported before mia kept it.',
    ),
  photometric: z.string(),
  rescale_slope: z.number(),
  rescale_intercept: z.number(),
  window_center: z.number().nullable(),
  window_width: z.number().nullable(),
  image_orientation: z
    .tuple([z.number(), z.number(), z.number(), z.number(), z.number(), z.number()])
    .nullable()
    .optional()
    .describe(
      'Image Orientation (Patient), PS3.3 C.7.6.2.1.1: direction cosines of the first row (towards increasing ' +
        'column) then of the first column (towards increasing row), in the patient axes +x left, +y posterior, ' +
        '+z head; the viewer puts patient directions on the image edges from it. Null when absent.',
    ),
  frame_values: z
    .array(frameValue)
    .nullable()
    .describe(
      'Each frame\'s own values, in frame order, for Enhanced multi-frame images, which keep them per frame in ' +
        'functional groups (PS3.3 C.7.6.16); the instance fields above are frame 0\'s. Null when every frame has ' +
        'the instance\'s values (classic images) or for files imported before mia read functional groups.',
    ),
  frames_problem: z
    .string()
    .nullable()
    .describe(
      'Why the frames\' own values could not be read (e.g. a Per-frame Functional Groups Sequence without one ' +
        'item per frame): every frame is then shown with the shared values, and analysis is not applicable.',
    ),
});
export type Instance = z.infer<typeof instance>;

export const instanceParams = z.object({ instance_uid: dicomUid });

export const tagEntry = z.object({
  tag: z.string().describe('(gggg,eeee)'),
  vr: z.string().nullable().describe('Value representation; null in Implicit VR files'),
  name: z.string().nullable().describe('Attribute name for common attributes (PS3.6), else null'),
  length: z.number().int().describe('Value length in bytes (4294967295: undefined length)'),
  value: z
    .string()
    .nullable()
    .describe('Printable value (multiple values joined by \\, long values cut); sequences as "n item(s)"; null for bulk data'),
});

export const instanceTags = z.object({
  instance_uid: z.string(),
  tags: z.array(tagEntry).describe('File meta (0002) then the top-level data set, in file order. Includes PHI: each read is audited.'),
});
export type InstanceTags = z.infer<typeof instanceTags>;

export const frameParams = z.object({
  instance_uid: dicomUid,
  frame: z.string().regex(/^\d{1,6}$/, 'expected a frame number from 0').transform(Number),
});

const windowNumber = z
  .string()
  .regex(/^-?\d+(\.\d+)?$/, 'expected a number')
  .transform(Number);

export const renderedQuery = z
  .object({
    window_center: windowNumber.optional().describe('VOI window center in modality units (e.g. HU)'),
    window_width: windowNumber.optional().describe('VOI window width (>= 1) in modality units'),
    aspect: z
      .enum(['native', 'physical'])
      .optional()
      .describe(
        'native (default): one PNG pixel per stored pixel. physical: resampled (bilinear) so the PNG\'s width:height is the ' +
          'image\'s in mm (non-square Pixel Spacing, e.g. 0.94\\0.47), for showing it as is',
      ),
  })
  .strict()
  .refine((q) => (q.window_center === undefined) === (q.window_width === undefined), {
    message: 'give window_center and window_width together',
    path: ['window_width'],
  })
  .refine((q) => q.window_width === undefined || q.window_width >= 1, { message: 'must be at least 1', path: ['window_width'] });
