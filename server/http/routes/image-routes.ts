/** Image access for viewers (read:scans): slice-ordered instances, frames as PNG or raw values, thumbnails. */
import * as api from '#server/api/import-schemas.ts';
import { scanIdParam } from '#server/api/schemas.ts';
import { MiaError } from '#server/errors.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { instanceTags, listInstances, rawFrame, renderedFrame, scanThumbnail } from '#server/imaging/images.ts';

const PNG = 'image/png';
/** Images of one instance never change (the archive is content-addressed); a viewer may cache them. */
const IMAGE_CACHE = { 'Cache-Control': 'private, max-age=3600' };

export const imageRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/scans/{scan_id}/instances',
    summary: 'The images of a scan in slice order',
    description:
      'Ordered by Image Position (Patient) projected on the slice normal, then Instance Number. Page with ' +
      'limit (up to 2000) and cursor.',
    access: scopes('read:scans'),
    params: scanIdParam,
    query: api.instancesQuery,
    response: api.instance,
    list: true,
    audit: 'instances.list',
    handle: async ({ services, params, query, audit }) => {
      audit({ target: `scan:${params.scan_id}` });
      const page = pageRequest(query);
      const result = await listInstances(services, params.scan_id, { offset: page.afterId, limit: page.limit });
      audit({ patientId: result.patientId });
      return { kind: 'list', items: result.items, nextAfterId: result.nextOffset };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/instances/{instance_uid}/frames/{frame}/rendered',
    summary: 'One frame as an 8-bit PNG, windowed',
    description:
      'Frames count from 0. Grey images are rescaled to modality units and windowed with window_center and ' +
      'window_width (default: the file\'s first window, else the modality preset); colour images are RGB. One PNG pixel per ' +
      'stored pixel, unless aspect=physical: then resampled (bilinear) to the image\'s physical width:height.',
    access: scopes('read:scans'),
    params: api.frameParams,
    query: api.renderedQuery,
    produces: PNG,
    audit: 'instances.rendered',
    handle: async ({ services, params, query, audit }) => {
      audit({ target: `instance:${params.instance_uid}` });
      const window =
        query.window_center !== undefined && query.window_width !== undefined ? { center: query.window_center, width: query.window_width } : undefined;
      const { png, patientId } = await renderedFrame(services, params.instance_uid, params.frame, window, query.aspect);
      audit({ patientId });
      return { kind: 'binary', contentType: PNG, body: png, headers: IMAGE_CACHE };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/instances/{instance_uid}/tags',
    summary: 'The top-level DICOM tags of an instance (tag browser)',
    description:
      'File meta and top-level data set elements with VR, name, length and a printable value; sequences are ' +
      'counted and bulk data is left out. The values include PHI (patient name, birth date): read:scans, audited.',
    access: scopes('read:scans'),
    params: api.instanceParams,
    response: api.instanceTags,
    audit: 'instances.tags',
    handle: async ({ services, params, audit }) => {
      audit({ target: `instance:${params.instance_uid}` });
      const { tags, patientId } = await instanceTags(services, params.instance_uid);
      audit({ patientId });
      return { kind: 'data', data: { instance_uid: params.instance_uid, tags } };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/instances/{instance_uid}/frames/{frame}/raw',
    summary: 'One frame as stored pixel values',
    description:
      'application/octet-stream of little-endian samples (Uint8 for 8-bit, Int16/Uint16 for 16-bit by ' +
      'X-Pixel-Representation, 32-bit for 32-bit data), interleaved, rows top to bottom. Headers: X-Rows, ' +
      'X-Columns, X-Samples-Per-Pixel, X-Bits-Allocated, X-Pixel-Representation, X-Rescale-Slope, ' +
      'X-Rescale-Intercept, X-Window-Center, X-Window-Width (the default window), X-Photometric-Interpretation.',
    access: scopes('read:scans'),
    params: api.frameParams,
    produces: 'application/octet-stream',
    audit: 'instances.raw',
    handle: async ({ services, params, audit }) => {
      audit({ target: `instance:${params.instance_uid}` });
      const raw = await rawFrame(services, params.instance_uid, params.frame);
      audit({ patientId: raw.patientId });
      return { kind: 'binary', contentType: 'application/octet-stream', body: raw.body, headers: { ...raw.headers, ...IMAGE_CACHE } };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/scans/{scan_id}/thumbnail',
    summary: 'A PNG thumbnail of the scan\'s middle slice (longest side 128 px)',
    access: scopes('read:scans'),
    params: scanIdParam,
    produces: PNG,
    audit: 'scans.thumbnail',
    handle: async ({ services, params, audit }) => {
      audit({ target: `scan:${params.scan_id}` });
      const thumb = await scanThumbnail(services, params.scan_id);
      audit({ patientId: thumb.patientId });
      if (thumb.png.length === 0) throw new MiaError('internal', 'empty thumbnail');
      return { kind: 'binary', contentType: PNG, body: thumb.png, headers: { 'Cache-Control': 'private, max-age=60' } };
    },
  }),
];
