/**
 * Sync between workstations and the hub (docs/sync.md, Transport), under /v1/sync, and the hub
 * admin's devices. Every sync call carries Mia-Sync-Protocol; another version is 426 naming the
 * one this hub speaks, so an old workstation is told to upgrade instead of mis-syncing.
 */
import { MiaError, invalid } from '#server/errors.ts';
import * as sync from '#server/api/sync-schemas.ts';
import { pageQuery } from '#server/api/schemas.ts';
import { pageRequest } from '#server/http/pagination.ts';
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { UPLOAD_LIMIT_BYTES } from '#server/imports/upload.ts';
import { BUCKET_FILE_MAX, BUCKET_MAX_BYTES, BUCKET_TYPE, blobPath, hasBlob, missingBlobs, receiveBlob, receiveBucket } from '#server/sync/blobs.ts';
import { enrollDevice, listDeviceViews, revokeDeviceById } from '#server/sync/devices.ts';
import { computeDigest } from '#server/sync/digest.ts';
import { parseContentRange, receiveRange, uploadOffset } from '#server/sync/resumable.ts';
import { liveHead, liveQuery } from '#server/sync/live.ts';
import { assign, assignBody, assignedQuery, assignedResponse, assignedTo, assignment, assignmentParams, toAssignment, unassign } from '#server/sync/assignments.ts';
import { listAssignments } from '#server/store/assignments.ts';
import { auditPushBody, auditPushResponse, MAX_AUDIT_PUSH, receiveAudit } from '#server/sync/audit-sync.ts';
import { findDeviceById } from '#server/store/devices.ts';
import { directoryResponse, readDirectory } from '#server/sync/directory.ts';
import { servePull } from '#server/sync/pull.ts';
import { receivePush, requireDevice } from '#server/sync/push.ts';
import { notFound } from '#server/errors.ts';
import { listQuarantine } from '#server/store/quarantine.ts';
import { discardQuarantined, quarantined, quarantineParams, quarantineQuery, releaseQuarantined, toQuarantined } from '#server/sync/quarantine.ts';
import { listRefused, refusedChange, refusedParams, sendRefusedAgain } from '#server/sync/refused.ts';

const admin = scopes('manage:users');

function checkProtocol(headers: Readonly<Record<string, string | undefined>>): void {
  const sent = headers[sync.SYNC_PROTOCOL_HEADER];
  if (sent === String(sync.SYNC_PROTOCOL)) return;
  throw new MiaError(
    'upgrade_required',
    sent === undefined ? 'Sync protocol version missing' : `Sync protocol ${sent.slice(0, 20)} is not spoken here`,
    `this hub speaks sync protocol ${sync.SYNC_PROTOCOL} (send Mia-Sync-Protocol: ${sync.SYNC_PROTOCOL}); upgrade the older of the two mia installs so both speak it`,
  );
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{8,200}$/;

export const syncRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/sync/hello',
    summary: 'The device this key belongs to, and the hub\'s protocol and time',
    access: scopes('sync:pull'),
    response: sync.helloResponse,
    handle: ({ services, auth, headers }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      return { kind: 'data', data: { device_id: device.id, device_name: auth.email, protocol: sync.SYNC_PROTOCOL, hub_time: services.clock.now().toISOString() } };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sync/push',
    summary: 'Push up to 500 changes of this device',
    description: 'Needs an Idempotency-Key header; the same key with the same body returns the same answer. Each change is accepted or rejected with a reason; the answer comes after the commit.',
    access: scopes('sync:push'),
    body: sync.pushBody,
    maxJsonBytes: 32 * 1024 * 1024,
    response: sync.pushResponse,
    audit: 'sync.push',
    handle: async ({ services, auth, body, headers, audit }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      const key = headers['idempotency-key'];
      if (key === undefined || !IDEMPOTENCY_KEY.test(key)) throw invalid('Idempotency-Key header missing or invalid', 'Idempotency-Key: 8-200 printable characters, new for each batch');
      const deviceTime = headers['mia-device-time'] === undefined ? null : Date.parse(headers['mia-device-time']);
      audit({ target: `device:${device.id}` });
      const result = await receivePush(services, device, key, body.changes, deviceTime === null || Number.isNaN(deviceTime) ? null : deviceTime);
      return { kind: 'data', data: result };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/pull',
    summary: 'Changes after a cursor, in commit order',
    access: scopes('sync:pull'),
    query: sync.pullQuery,
    response: sync.pullResponse,
    audit: 'sync.pull',
    handle: async ({ services, auth, query, headers, audit }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      audit({ target: `device:${device.id}` });
      return { kind: 'data', data: await servePull(services, device, query.cursor, query.limit) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/directory',
    summary: 'The hub\'s users and their keys (digests only), for workstations to sign them in',
    description: 'The hub is authoritative for people: a workstation replaces its copies of hub users and keys with this each round.',
    access: scopes('sync:pull'),
    response: directoryResponse,
    audit: 'sync.directory',
    handle: async ({ services, auth, headers, audit }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      audit({ target: `device:${device.id}` });
      return { kind: 'data', data: await readDirectory(services.db) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sync/audit',
    summary: 'Send this device\'s audit events up (append-only, numbered; gaps are recorded)',
    description: `At most ${MAX_AUDIT_PUSH} events, each under its number on the device; one the hub has is skipped, a number that never came is recorded as a gap and shown on the devices screen.`,
    access: scopes('sync:push'),
    body: auditPushBody,
    maxJsonBytes: 16 * 1024 * 1024,
    response: auditPushResponse,
    audit: 'sync.audit',
    handle: async ({ services, auth, body, headers, audit }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      audit({ target: `device:${device.id}` });
      const at = services.clock.now().toISOString();
      const result = await services.db.transaction(async (tx) => {
        const row = await findDeviceById(tx, device.id);
        if (!row) throw new MiaError('internal', 'device row missing');
        return await receiveAudit(tx, row, body, at);
      }, { durable: true });
      if (result.gaps.length > 0) services.log.error('sync.audit_gap', { device_id: device.id, gaps: result.gaps.length, missing: result.gaps.reduce((n, g) => n + g.to - g.from + 1, 0) });
      return { kind: 'data', data: result };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/pull/live',
    summary: 'Server-Sent Events: head (the newest change number this device would pull) now and whenever it moves',
    description: 'Tells a workstation when to pull; the pull itself is GET /v1/sync/pull. The stream ends after 10 minutes; open another.',
    access: scopes('sync:pull'),
    query: liveQuery,
    produces: 'text/event-stream',
    handle: ({ services, auth, headers, query }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      return { kind: 'events', run: liveHead(services.db, device.id, query.wait * 1000) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sync/blobs/missing',
    summary: 'Which of these instance files the hub lacks',
    access: scopes('sync:push'),
    body: sync.missingBody,
    response: sync.missingResponse,
    handle: ({ services, auth, body, headers }) => {
      checkProtocol(headers);
      requireDevice(auth.device);
      return { kind: 'data', data: { missing: missingBlobs(services.dataDir, body.sha256) } };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sync/blobs',
    summary: 'Upload many small instance files at once (a bucket)',
    description: `Body (${BUCKET_TYPE}): per file its SHA-256 (32 bytes), length (4 bytes, big-endian) and bytes; files up to ${BUCKET_FILE_MAX} bytes, ${BUCKET_MAX_BYTES} bytes in all. Every file is checked against its digest and made durable before the answer; one mismatch refuses the bucket.`,
    access: scopes('sync:push'),
    upload: { contentTypes: [BUCKET_TYPE], maxBytes: BUCKET_MAX_BYTES },
    response: sync.bucketStored,
    successStatus: 201,
    audit: 'sync.blobs',
    handle: async ({ services, auth, upload, headers, audit }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      if (!upload) throw new MiaError('internal', 'upload route without a body');
      audit({ target: `device:${device.id}` });
      return { kind: 'data', status: 201, data: await receiveBucket(services.dataDir, upload.stream, upload.maxBytes) };
    },
  }),
  defineRoute({
    method: 'put',
    path: '/v1/sync/blobs/{sha256}',
    summary: 'Upload one instance file under its SHA-256, whole or in ranges',
    description: 'Streamed; the hub hashes what it receives and keeps it only if it matches, before it answers. With Content-Range: bytes START-END/TOTAL the file goes in ranges, each made durable before the answer; a range must start where the hub\'s copy ends (GET .../upload), and the last one completes the file.',
    access: scopes('sync:push'),
    params: sync.blobParams,
    upload: { contentTypes: ['application/octet-stream', 'application/dicom'], maxBytes: UPLOAD_LIMIT_BYTES },
    response: sync.blobStored,
    successStatus: 201,
    audit: 'sync.blob',
    handle: async ({ services, auth, params, upload, headers, audit }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      if (!upload) throw new MiaError('internal', 'upload route without a body');
      audit({ target: `device:${device.id}` });
      const range = parseContentRange(headers['content-range'], upload.maxBytes);
      if (range) {
        const part = await receiveRange(services.dataDir, device.id, params.sha256, upload.stream, range);
        return { kind: 'data', status: part.stored ? 201 : 200, data: { sha256: params.sha256, bytes: range.total, stored: part.stored, received: part.received, complete: part.complete } };
      }
      const result = await receiveBlob(services.dataDir, params.sha256, upload.stream, upload.maxBytes);
      return { kind: 'data', status: result.stored ? 201 : 200, data: { sha256: params.sha256, ...result, received: result.bytes, complete: true } };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/blobs/{sha256}/upload',
    summary: 'How much of a file the hub holds from this device: where a cut-off upload goes on from',
    access: scopes('sync:push'),
    params: sync.blobParams,
    response: sync.uploadState,
    handle: ({ services, auth, params, headers }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      return { kind: 'data', data: { sha256: params.sha256, ...uploadOffset(services.dataDir, device.id, params.sha256) } };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/blobs/{sha256}',
    summary: 'Download one instance file by its SHA-256',
    access: scopes('sync:pull'),
    params: sync.blobParams,
    produces: 'application/dicom',
    audit: 'sync.blob_read',
    handle: ({ services, auth, params, headers, audit }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      if (!hasBlob(services.dataDir, params.sha256)) throw notFound('File', params.sha256);
      audit({ target: `device:${device.id}` });
      return { kind: 'file', path: blobPath(services.dataDir, params.sha256), fileName: `${params.sha256}.dcm`, contentType: 'application/dicom' };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/digest',
    summary: 'Per-entity counts and hashes, for anti-entropy checks',
    access: scopes('sync:pull'),
    query: sync.digestQuery,
    response: sync.digestResponse,
    handle: async ({ services, query, headers }) => {
      checkProtocol(headers);
      const studies = query.studies === undefined ? null : query.studies.split(',').filter((s) => s !== '');
      return { kind: 'data', data: await computeDigest(services.db, studies) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/status',
    summary: 'This workstation\'s sync: online or offline, pending changes, last sync, last error',
    access: scopes('read:scans'),
    response: sync.syncStatus,
    handle: async ({ services }) => ({ kind: 'data', data: await services.sync.status() }),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sync/run',
    summary: 'Sync with the hub now; answers with the status after the round',
    access: scopes('read:scans'),
    response: sync.syncStatus,
    audit: 'sync.run',
    handle: async ({ services }) => {
      await services.sync.runNow();
      return { kind: 'data', data: await services.sync.status() };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/refused',
    summary: 'This workstation\'s changes the hub refused for good, with the reason, oldest first',
    access: admin,
    query: pageQuery,
    response: refusedChange,
    list: true,
    audit: 'sync.refused',
    handle: async ({ services, query }) => {
      const page = await listRefused(services, pageRequest(query));
      return { kind: 'list', items: page.items, nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sync/refused/{change_id}/send-again',
    summary: 'Send a refused change again with the next sync round (its cause mended: a file restored, the hub upgraded)',
    access: admin,
    params: refusedParams,
    response: sync.syncStatus,
    audit: 'sync.refused_send_again',
    handle: async ({ services, params, audit }) => {
      audit({ target: `change:${params.change_id}` });
      await sendRefusedAgain(services, params.change_id);
      return { kind: 'data', data: await services.sync.status() };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/quarantine',
    summary: 'Changes the hub kept for an admin instead of merging (a Patient ID with other demographics)',
    access: admin,
    query: pageQuery.extend(quarantineQuery.shape),
    response: quarantined,
    list: true,
    audit: 'sync.quarantine',
    handle: async ({ services, query }) => {
      const page = await listQuarantine(services.db, pageRequest(query), query.resolved === 'true');
      return { kind: 'list', items: page.items.map(toQuarantined), nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sync/quarantine/{change_id}/release',
    summary: 'Apply a quarantined change as it was made (the admin has checked it), and send it to the other workstations',
    access: admin,
    params: quarantineParams,
    response: quarantined,
    audit: 'sync.quarantine_release',
    handle: async ({ services, params, auth, audit }) => {
      audit({ target: `change:${params.change_id}` });
      return { kind: 'data', data: await releaseQuarantined(services, params.change_id, auth.userId) };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sync/quarantine/{change_id}/discard',
    summary: 'Keep a quarantined change out for good (it stays listed, with the decision)',
    access: admin,
    params: quarantineParams,
    response: quarantined,
    audit: 'sync.quarantine_discard',
    handle: async ({ services, params, auth, audit }) => {
      audit({ target: `change:${params.change_id}` });
      return { kind: 'data', data: await discardQuarantined(services, params.change_id, auth.userId) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/assigned',
    summary: 'The studies assigned to this workstation, with the files each is made of (or unchanged since the version known)',
    access: scopes('sync:pull'),
    query: assignedQuery,
    response: assignedResponse,
    handle: async ({ services, auth, headers, query }) => {
      checkProtocol(headers);
      const device = requireDevice(auth.device);
      return { kind: 'data', data: await assignedTo(services.db, device.ref, query.known) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/sync/assignments',
    summary: 'Studies assigned to workstations (to be read offline there)',
    access: admin,
    query: pageQuery,
    response: assignment,
    list: true,
    audit: 'sync.assignments',
    handle: async ({ services, query }) => {
      const page = await listAssignments(services.db, pageRequest(query));
      return { kind: 'list', items: page.items.map(toAssignment), nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/sync/assignments',
    summary: 'Assign a study to a workstation (optionally for a reader): it fetches the study to read it offline',
    access: admin,
    body: assignBody,
    response: assignment,
    successStatus: 201,
    audit: 'sync.assign',
    handle: async ({ services, body, auth, audit }) => {
      audit({ target: `study:${body.study_uid} device:${body.device_id}` });
      return { kind: 'data', status: 201, data: await assign(services, body, auth.userId) };
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/sync/assignments/{id}',
    summary: 'Take an assignment back (what the workstation fetched stays there)',
    access: admin,
    params: assignmentParams,
    response: assignment,
    audit: 'sync.unassign',
    handle: async ({ services, params, audit }) => {
      audit({ target: `assignment:${params.id}` });
      return { kind: 'data', data: await unassign(services, params.id) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/devices',
    summary: 'Enrolled workstations: last seen, lag, clock offset',
    access: admin,
    query: pageQuery,
    response: sync.device,
    list: true,
    audit: 'devices.list',
    handle: async ({ services, query }) => {
      const page = await listDeviceViews(services, pageRequest(query));
      return { kind: 'list', items: page.items, nextAfterId: page.nextAfterId };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/v1/devices',
    summary: 'Enroll a workstation: a device and its key (shown once)',
    access: admin,
    currentKeyOnly: true,
    body: sync.enrollBody,
    response: sync.enrolled,
    successStatus: 201,
    audit: 'devices.enroll',
    handle: async ({ services, body, auth, audit }) => {
      const result = await enrollDevice(services, body.name, auth.userId);
      audit({ target: `device:${result.device.id}` });
      return { kind: 'data', status: 201, data: result };
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/devices/{device_id}',
    summary: 'Revoke a workstation: its key is refused at once',
    access: admin,
    currentKeyOnly: true,
    params: sync.deviceParams,
    response: sync.device,
    audit: 'devices.revoke',
    handle: async ({ services, params, audit }) => {
      audit({ target: `device:${params.device_id}` });
      return { kind: 'data', data: await revokeDeviceById(services, params.device_id) };
    },
  }),
];
