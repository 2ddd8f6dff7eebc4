/** Request and response shapes of a reader's measurements (length, ROI, probe) on a scan. */
import { z } from 'zod';
import { PIXEL_SPACING_SOURCES } from '#common/pixel-spacing.ts';

// Not imported from schemas.ts: the report schema there lists measurements (no import cycle).
const dicomUid = z.string().min(1).max(64).regex(/^[0-9.]+$/, 'expected a DICOM UID (digits and dots)');

export const MEASUREMENT_KINDS = ['length', 'ellipse', 'rectangle', 'probe'] as const;
export type MeasurementKind = (typeof MEASUREMENT_KINDS)[number];

/** A point in image pixels: column, row (fractions allowed: drawn on a zoomed image). */
const point = z.tuple([z.number().finite().min(-1e5).max(1e5), z.number().finite().min(-1e5).max(1e5)]);

export const createMeasurementBody = z
  .object({
    instance_uid: dicomUid.describe('SOP Instance UID of the image measured (must belong to the scan)'),
    frame: z.number().int().min(0).max(100_000).describe('0-based frame of the instance'),
    kind: z.enum(MEASUREMENT_KINDS),
    points: z
      .array(point)
      .min(1)
      .max(2)
      .describe('length: its two ends; ellipse, rectangle: two opposite corners of the bounding box; probe: one point'),
  })
  .strict()
  .superRefine((body, ctx) => {
    const wanted = body.kind === 'probe' ? 1 : 2;
    if (body.points.length !== wanted) {
      ctx.addIssue({ code: 'custom', path: ['points'], message: `a ${body.kind} has ${wanted} point(s)` });
    }
  });
export type CreateMeasurementBody = z.output<typeof createMeasurementBody>;

export const updateMeasurementBody = z
  .object({
    points: z
      .array(point)
      .min(1)
      .max(2)
      .describe('The new geometry, as when created (length: its two ends; ellipse, rectangle: two opposite corners; probe: one point)'),
  })
  .strict();
export type UpdateMeasurementBody = z.output<typeof updateMeasurementBody>;

export const measurement = z.object({
  id: z.string(),
  scan_id: z.string(),
  instance_uid: z.string(),
  frame: z.number().int(),
  kind: z.enum(MEASUREMENT_KINDS),
  points: z.array(z.tuple([z.number(), z.number()])),
  length_mm: z.number().nullable(),
  area_mm2: z.number().nullable(),
  mean: z.number().nullable(),
  sd: z.number().nullable(),
  value: z.number().nullable(),
  unit: z.string().nullable(),
  pixel_spacing_source: z
    .enum(PIXEL_SPACING_SOURCES)
    .nullable()
    .describe('Where the spacing behind length_mm/area_mm2 came from (the instance\'s pixel_spacing_source): imager_pixel_spacing means at the detector, not the patient'),
  created_at: z.string(),
});
export type Measurement = z.infer<typeof measurement>;

export const measurementIdParam = z.object({ id: z.string().regex(/^msr_[0-9a-f]{24}$/, 'expected a measurement id (msr_...)') });
