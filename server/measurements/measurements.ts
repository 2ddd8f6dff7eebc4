/**
 * A reader's measurements on a scan: kept per reader (each radiologist sees, and reports, only
 * their own), on one frame of one of the scan's images, with its geometry and values, so the
 * same numbers are shown again and reported. The server computes the values itself from the
 * stored frame (common/measure.ts, the viewer's own rules): a client's numbers are not trusted
 * into a report.
 */
import type { CreateMeasurementBody, Measurement, MeasurementKind, UpdateMeasurementBody } from '#server/api/measurement-schemas.ts';
import type { Clock } from '#server/clock.ts';
import { measure, valueUnit } from '#common/measure.ts';
import { modalityFrame } from '#server/imaging/images.ts';
import type { ImageDeps } from '#server/imaging/images.ts';
import { conflict, forbidden, invalid, notFound } from '#server/errors.ts';
import { inDurableTransaction, type Database } from '#server/store/database.ts';
import { decodeSpacing, findInstance } from '#server/store/instances.ts';
import {
  deleteMeasurement,
  findFinalReportListing,
  findMeasurement,
  insertMeasurement,
  listReaderMeasurements,
  updateMeasurementGeometry,
  type MeasurementRow,
} from '#server/store/measurements.ts';
import type { PageRequest } from '#server/store/page.ts';
import { newPublicId } from '#server/store/public-id.ts';
import { getScanRow } from '#server/scans/scans.ts';

export type MeasurementDeps = { db: Database; clock: Clock };

export function toMeasurement(row: MeasurementRow): Measurement {
  return {
    id: row.public_id,
    scan_id: row.scan_id,
    instance_uid: row.instance_uid,
    frame: row.frame,
    kind: row.kind as MeasurementKind,
    points: JSON.parse(row.points) as Array<[number, number]>,
    length_mm: row.length_mm,
    area_mm2: row.area_mm2,
    mean: row.mean,
    sd: row.sd,
    value: row.value,
    unit: row.unit,
    pixel_spacing_source: decodeSpacing(row.instance_spacing).source,
    created_at: row.created_at,
  };
}

export async function listMeasurements(
  deps: MeasurementDeps,
  scanId: string,
  userRef: number,
  page: PageRequest,
): Promise<{ items: Measurement[]; nextAfterId: number | null; patientId: string }> {
  const scan = await getScanRow(deps, scanId);
  const rows = await listReaderMeasurements(deps.db, scan.id, userRef, page);
  return { items: rows.items.map(toMeasurement), nextAfterId: rows.nextAfterId, patientId: scan.patient_id };
}

export async function createMeasurement(
  deps: ImageDeps,
  scanId: string,
  userRef: number,
  body: CreateMeasurementBody,
): Promise<{ measurement: Measurement; patientId: string }> {
  const scan = await getScanRow(deps, scanId);
  const instance = await findInstance(deps.db, body.instance_uid);
  // An image of another scan would list under this scan's report: refuse it rather than mix patients.
  if (!instance || instance.scan_ref !== scan.id) throw notFound('Instance of this scan', body.instance_uid);
  if (body.frame >= instance.frames) {
    throw invalid(`frame ${body.frame} is out of range`, `the image has ${instance.frames} frame(s), numbered from 0`);
  }
  const { frame, spacing } = await modalityFrame(deps, instance, body.frame);
  const values = measure(frame, body.kind, body.points, spacing);
  const publicId = newPublicId('msr');
  await insertMeasurement(deps.db, {
    public_id: publicId,
    scan_ref: scan.id,
    instance_ref: instance.id,
    frame: body.frame,
    user_ref: userRef,
    kind: body.kind,
    points: JSON.stringify(body.points),
    length_mm: values.length_mm,
    area_mm2: values.area_mm2,
    mean: values.mean,
    sd: values.sd,
    value: values.value,
    unit: valueUnit(scan.modality),
    created_at: deps.clock.now().toISOString(),
  });
  const row = await findMeasurement(deps.db, publicId);
  if (!row) throw notFound('Measurement', publicId);
  return { measurement: toMeasurement(row), patientId: scan.patient_id };
}

/**
 * A measurement a final report lists is part of what was signed (the report lists its author's
 * measurements made until signing, not a copy): it stays as signed, like the verdicts, and a
 * later change of mind is an addendum (issue 11).
 */
async function refuseIfSigned(db: Database, row: MeasurementRow, what: string): Promise<void> {
  const report = await findFinalReportListing(db, row);
  if (report) {
    throw conflict(
      `This measurement is part of final report ${report.public_id}; it cannot be ${what}`,
      `report ${report.public_id} was finalized at ${report.finalized_at}; draw a new measurement and add an addendum: POST /v1/reports/${report.public_id}/addenda`,
    );
  }
}

/** Moves a measurement or its ends/corners (owner only); the server computes its values again. */
export async function editMeasurement(
  deps: ImageDeps,
  publicId: string,
  userRef: number,
  body: UpdateMeasurementBody,
): Promise<{ measurement: Measurement; patientId: string }> {
  const row = await findMeasurement(deps.db, publicId);
  if (!row) throw notFound('Measurement', publicId);
  if (row.user_ref !== userRef) throw forbidden('This measurement belongs to another reader', 'only its author may change it');
  const kind = row.kind as MeasurementKind;
  const wanted = kind === 'probe' ? 1 : 2;
  if (body.points.length !== wanted) throw invalid(`a ${kind} has ${wanted} point(s)`, `points has ${body.points.length}`);
  await refuseIfSigned(deps.db, row, 'changed');
  const instance = await findInstance(deps.db, row.instance_uid);
  if (!instance) throw notFound('Instance', row.instance_uid);
  const { frame, spacing } = await modalityFrame(deps, instance, row.frame);
  const values = measure(frame, kind, body.points, spacing);
  // The frame was read outside the transaction (it may await the file): check the lock again inside it.
  await inDurableTransaction(deps.db, async (tx) => {
    const now = await findMeasurement(tx, publicId);
    if (!now) throw notFound('Measurement', publicId);
    await refuseIfSigned(tx, now, 'changed');
    await updateMeasurementGeometry(tx, now.id, { points: JSON.stringify(body.points), ...values });
  });
  const updated = await findMeasurement(deps.db, publicId);
  if (!updated) throw notFound('Measurement', publicId);
  return { measurement: toMeasurement(updated), patientId: updated.patient_id };
}

export async function removeMeasurement(deps: MeasurementDeps, publicId: string, userRef: number): Promise<{ measurement: Measurement; patientId: string }> {
  const row = await findMeasurement(deps.db, publicId);
  if (!row) throw notFound('Measurement', publicId);
  // Another reader's measurement is theirs to keep: they may be reporting on it.
  if (row.user_ref !== userRef) throw forbidden('This measurement belongs to another reader', 'only its author may delete it');
  await refuseIfSigned(deps.db, row, 'deleted');
  await deleteMeasurement(deps.db, row.id);
  return { measurement: toMeasurement(row), patientId: row.patient_id };
}
