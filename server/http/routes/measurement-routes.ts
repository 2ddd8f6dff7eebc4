/** A reader's measurements (length, ellipse/rectangle ROI, pixel probe) on a scan. */
import * as m from '#server/api/measurement-schemas.ts';
import * as api from '#server/api/schemas.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { createMeasurement, editMeasurement, listMeasurements, removeMeasurement } from '#server/measurements/measurements.ts';

export const measurementRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/scans/{scan_id}/measurements',
    summary: 'The calling reader\'s measurements on a scan',
    description: 'Measurements are kept per reader: each user sees their own, oldest first. Page with limit and cursor.',
    access: scopes('read:scans'),
    params: api.scanIdParam,
    query: api.pageQuery.strict(),
    response: m.measurement,
    list: true,
    audit: 'measurements.list',
    handle: async ({ services, auth, params, query, audit }) => {
      audit({ target: `scan:${params.scan_id}` });
      const { items, nextAfterId, patientId } = await listMeasurements(services, params.scan_id, auth.userRef, pageRequest(query));
      audit({ patientId });
      return { kind: 'list', items, nextAfterId };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/scans/{scan_id}/measurements',
    summary: 'Keep a measurement on one frame of the scan',
    description:
      'The server computes the values from the stored frame: lengths and ROI areas in mm from the frame\'s own pixel spacing ' +
      '(null without one), ROI mean/SD (pixels whose centres are inside) and probe values in modality units (HU on CT). ' +
      'Points are image pixels (column, row). The instance must belong to the scan.',
    access: scopes('write:reports'),
    params: api.scanIdParam,
    body: m.createMeasurementBody,
    response: m.measurement,
    successStatus: 201,
    audit: 'measurements.create',
    handle: async ({ services, auth, params, body, audit }) => {
      audit({ target: `scan:${params.scan_id}` });
      const { measurement, patientId } = await createMeasurement(services, params.scan_id, auth.userRef, body);
      audit({ target: `scan:${params.scan_id} measurement:${measurement.id}`, patientId });
      return { kind: 'data', data: measurement, status: 201 };
    },
  }),
  defineRoute({
    method: 'patch',
    path: '/v1/measurements/{id}',
    summary: 'Move one of the calling reader\'s measurements, or its ends or corners',
    description:
      'New points (as many as its kind has); the server computes the values again from the stored frame. Kind, image and ' +
      'frame stay. 409 when a final report lists it (its author\'s, made before signing): it stays as signed; add an addendum.',
    access: scopes('write:reports'),
    params: m.measurementIdParam,
    body: m.updateMeasurementBody,
    response: m.measurement,
    audit: 'measurements.update',
    handle: async ({ services, auth, params, body, audit }) => {
      audit({ target: `measurement:${params.id}` });
      const { measurement, patientId } = await editMeasurement(services, params.id, auth.userRef, body);
      audit({ target: `measurement:${params.id} scan:${measurement.scan_id}`, patientId });
      return { kind: 'data', data: measurement };
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/measurements/{id}',
    summary: 'Delete one of the calling reader\'s measurements',
    description: '409 when a final report lists it (its author\'s, made before signing): it stays as signed.',
    access: scopes('write:reports'),
    params: m.measurementIdParam,
    response: m.measurement,
    audit: 'measurements.delete',
    handle: async ({ services, auth, params, audit }) => {
      audit({ target: `measurement:${params.id}` });
      const { measurement, patientId } = await removeMeasurement(services, params.id, auth.userRef);
      audit({ target: `measurement:${params.id} scan:${measurement.scan_id}`, patientId });
      return { kind: 'data', data: measurement };
    },
  }),
];
