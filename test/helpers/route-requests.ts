/** One real request per route of the table, used by the auth matrix and the OpenAPI tests. */
import type { Role } from '#common/vocabulary.ts';
import type { AuthContext } from '#server/auth/authenticate.ts';
import { createExport } from '#server/exports/exports.ts';
import { insertMeasurement } from '#server/store/measurements.ts';
import { newPublicId } from '#server/store/public-id.ts';
import type { ModelVocabularies } from '#server/reports/recommendation.ts';
import { draftReport, updateReport } from '#server/reports/reports.ts';
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { BUCKET_TYPE, encodeBucket, receiveBlob } from '#server/sync/blobs.ts';
import { enrollDevice } from '#server/sync/devices.ts';
import { assign } from '#server/sync/assignments.ts';
import { createPeer } from '#server/peers/peers.ts';
import { createRule } from '#server/routing/rules.ts';
import { sendAnalysisNow } from '#server/routing/send-jobs.ts';
import { quarantineChange } from '#server/store/quarantine.ts';
import { appendChanges, markPushed } from '#server/store/sync-log.ts';
import { uuid7 } from '#server/sync/uuid7.ts';
import { CT_SMALL, fixtureFolder, seedImportedInstance } from './image-fixture.ts';
import { installOperatingPointModel } from './operating-point-model.ts';
import type { TestServer } from './server.ts';
import { seedAnalysis, seedScan } from './seed.ts';

const STOW_BOUNDARY = 'mia-route-request';
const STOW_TYPE = `multipart/related; type="application/dicom"; boundary=${STOW_BOUNDARY}`;
function stowBody(file: Buffer): Buffer {
  return Buffer.concat([Buffer.from(`--${STOW_BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n`), file, Buffer.from(`\r\n--${STOW_BOUNDARY}--\r\n`)]);
}

export type Caller = { role: Role; key: string; auth: AuthContext };
/** `key`: the key a route's own kind of caller uses (a device's, for sync); the auth matrix ignores it. */
export type Call = { path: string; body?: unknown; rawBody?: Buffer; headers?: Record<string, string>; key?: string };
export type Builder = (caller: Caller) => Call | Promise<Call>;

export async function routeRequests(t: TestServer): Promise<Record<string, Builder>> {
  const newPeer = () => createPeer(t.server.services, { kind: 'dimse', name: `node ${randomBytes(4).toString('hex')}`, ae_title: 'NODE', host: '127.0.0.1', port: 104, allow_incoming: false }, 'test');
  const newRule = async () => createRule(t.server.services, { name: `rule ${randomBytes(4).toString('hex')}`, enabled: true, event: 'analysis.finished', conditions: {}, peer: (await newPeer()).id }, 'test');
  const newSend = async () => sendAnalysisNow(t.server.services, await analysisId(), (await newPeer()).id, 'test');
  // A job whose attempts ran out: the state an admin retries.
  const failedSend = async (): Promise<string> => {
    const job = await newSend();
    await t.server.services.db.run("UPDATE send_jobs SET status = 'gave_up', attempts = 8, last_error = 'test' WHERE public_id = ?", [job.id]);
    return job.id;
  };
  const analysedScan = async (): Promise<string> => {
    const scan = await seedScan(t.server.services.db);
    await seedAnalysis(t.server.services.db, scan, [{}]);
    return scan.scanId;
  };
  const analysedFindingId = async (): Promise<string> => {
    const scan = await seedScan(t.server.services.db);
    await seedAnalysis(t.server.services.db, scan, [{}]);
    const row = (await t.server.services.db.get('SELECT f.public_id FROM findings f JOIN analyses a ON a.id = f.analysis_ref WHERE a.scan_ref = ?', [scan.scanRef])) as { public_id: string };
    return row.public_id;
  };
  const analysisId = async (): Promise<string> => {
    const scan = await seedScan(t.server.services.db);
    await seedAnalysis(t.server.services.db, scan, [{}]);
    const row = (await t.server.services.db.get('SELECT public_id FROM analyses WHERE scan_ref = ?', [scan.scanRef])) as { public_id: string };
    return row.public_id;
  };
  // No rules needed: these reports exist only to be requested.
  const vocabularies: ModelVocabularies = () => ({ recommendations: null, displayName: (label) => label });
  const newReport = async (caller: Caller): Promise<string> => (await draftReport(t.server.services, vocabularies, caller.auth.userRef, { scanId: await analysedScan() })).id;
  const finalReport = async (caller: Caller): Promise<string> =>
    (await updateReport(t.server.services, vocabularies, caller.auth.userRef, await newReport(caller), { status: 'final' })).id;
  const importFolder = fixtureFolder();
  const imported = await seedImportedInstance(t);
  // mia's own DICOMweb server as a peer: a search and a retrieve that really reach a server.
  let selfPeer: Promise<string> | undefined;
  const ownDicomWeb = (): Promise<string> =>
    (selfPeer ??= createPeer(t.server.services, { kind: 'dicomweb', name: `this mia ${randomBytes(4).toString('hex')}`, url: `${t.url}/dicom-web`, authorization: `Bearer ${t.adminKey}` }, 'test').then((p) => p.id));
  const retrieveRecord = async (): Promise<string> => {
    const record = await t.request('POST', '/v1/dicom/retrieve', { body: { peer: await ownDicomWeb(), study_uid: '1.2.826.0.1.3680043.10.1' } });
    return String(record.json.data.id);
  };
  const ownKey = async (caller: Caller): Promise<string> => (await t.keyFor(caller.role, { email: caller.auth.email })).keyId;
  // An SR references only images the archive holds: an analysis with a finding on a stored one.
  const storedAnalysis = async (): Promise<string> => {
    const db = t.server.services.db;
    const scan = (await db.get(`SELECT s.id AS "scanRef", s.scan_id AS "scanId", p.patient_id AS "patientId", st.study_uid AS "studyUid"
      FROM instances i JOIN scans s ON s.id = i.scan_ref JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref
      WHERE i.sop_instance_uid = ?`, [imported.instanceUid])) as { scanRef: number; scanId: string; patientId: string; studyUid: string };
    await seedAnalysis(db, scan, [{ instanceUid: imported.instanceUid }]);
    return ((await db.get('SELECT public_id FROM analyses WHERE scan_ref = ? ORDER BY id DESC LIMIT 1', [scan.scanRef])) as { public_id: string }).public_id;
  };
  const signedStoredReport = async (caller: Caller): Promise<string> => {
    await storedAnalysis();
    const draft = await draftReport(t.server.services, vocabularies, caller.auth.userRef, { scanId: imported.scanId });
    return (await updateReport(t.server.services, vocabularies, caller.auth.userRef, draft.id, { status: 'final' })).id;
  };
  const radiologistId = async (): Promise<string> => (await t.keyFor('radiologist')).userId;
  const lengthBody = { instance_uid: imported.instanceUid, frame: 0, kind: 'length', points: [[1, 1], [10, 1]] } as const;
  // DELETE needs one of the caller's own.
  const ownMeasurement = async (caller: Caller): Promise<string> => {
    const refs = (await t.server.services.db.get('SELECT id, scan_ref FROM instances WHERE sop_instance_uid = ?', [imported.instanceUid])) as { id: number; scan_ref: number };
    const publicId = newPublicId('msr');
    await insertMeasurement(t.server.services.db, {
      public_id: publicId, scan_ref: refs.scan_ref, instance_ref: refs.id, frame: 0, user_ref: caller.auth.userRef, kind: 'length',
      points: '[[1,1],[10,1]]', length_mm: 6, area_mm2: null, mean: null, sd: null, value: null, unit: null, created_at: new Date(0).toISOString(),
    });
    return publicId;
  };

  // A workstation enrolled on this server, for the sync routes: its key and the protocol header.
  const device = await enrollDevice(t.server.services, `matrix ${Math.random().toString(36).slice(2)}`, 'test');
  const sync = (headers: Record<string, string> = {}): { key: string; headers: Record<string, string> } => ({ key: device.key, headers: { 'Mia-Sync-Protocol': '1', ...headers } });
  const randomBlob = (): { sha: string; bytes: Buffer } => {
    const bytes = randomBytes(256);
    return { sha: createHash('sha256').update(bytes).digest('hex'), bytes };
  };
  const storedBlob = randomBlob();
  await receiveBlob(t.server.services.dataDir, storedBlob.sha, Readable.from([storedBlob.bytes]), 1024);
  // A verdict the hub kept for an admin, on a finding of its own, that releasing can apply.
  const quarantinedVerdict = async (): Promise<string> => {
    const findingId = await analysedFindingId();
    const now = t.server.services.clock.now();
    const changeId = uuid7(now.getTime());
    await quarantineChange(t.server.services.db, {
      change_id: changeId, device_id: device.device.id, entity: 'review', entity_key: uuid7(now.getTime()), reason: 'matrix',
      payload: JSON.stringify({ finding_id: findingId, verdict: 'accepted', reason: null, supersedes: [], created_at: now.toISOString() }),
      created_at: now.toISOString(), hlc: `${String(now.getTime()).padStart(15, '0')}-0000-${device.device.id}`, user_id: null,
    });
    return changeId;
  };
  // A change of this server's own that the hub refused, as a push marks one.
  const refusedChange = async (): Promise<string> => {
    const { db, replica, clock } = t.server.services;
    const now = clock.now();
    const changeId = uuid7(now.getTime());
    await appendChanges(db, [{ changeId, deviceId: replica.deviceId, entity: 'scan', entityKey: uuid7(now.getTime()), op: 'put', hlc: `${String(now.getTime()).padStart(15, '0')}-0000-${replica.deviceId}`, userId: null, payload: '{}' }], now.toISOString());
    await markPushed(db, changeId, 'rejected', 'matrix');
    return changeId;
  };
  // A study of its own for each assignment, so one taken back does not touch another's.
  const studyUid = async (): Promise<string> => (await seedScan(t.server.services.db)).studyUid;
  const revocable = async (): Promise<string> => (await enrollDevice(t.server.services, 'to revoke', 'test')).device.id;

  return {
    'GET /v1/sync/hello': () => ({ path: '/v1/sync/hello', ...sync() }),
    'GET /v1/sync/directory': () => ({ path: '/v1/sync/directory', ...sync() }),
    'POST /v1/sync/push': () => ({
      path: '/v1/sync/push',
      ...sync({ 'Idempotency-Key': randomBytes(16).toString('hex') }),
      // Refused (no such series here), which is still a 200 with a per-change answer.
      body: { changes: [{ change_id: uuid7(Date.now()), entity: 'analysis', key: newPublicId('ana'), op: 'put', hlc: `${String(Date.now()).padStart(15, '0')}-0000-matrix`, user_id: null, payload: { scan_id: '1.2.3' } }] },
    }),
    'GET /v1/sync/pull': () => ({ path: '/v1/sync/pull', ...sync() }),
    'GET /v1/sync/pull/live': () => ({ path: '/v1/sync/pull/live?wait=0', ...sync() }),
    'POST /v1/sync/audit': () => ({
      path: '/v1/sync/audit',
      ...sync(),
      body: { after: 0, events: [{ seq: 1, at: new Date().toISOString(), request_id: null, key_id: null, user_id: null, action: 'scans.list', target: null, patient_id: null, patient_ids: null, outcome: 'success', status_code: 200, address: null, count: 1 }] },
    }),
    'POST /v1/sync/blobs/missing': () => ({ path: '/v1/sync/blobs/missing', ...sync(), body: { sha256: [storedBlob.sha, randomBlob().sha] } }),
    'PUT /v1/sync/blobs/{sha256}': () => {
      const blob = randomBlob();
      return { path: `/v1/sync/blobs/${blob.sha}`, ...sync({ 'Content-Type': 'application/octet-stream' }), rawBody: blob.bytes };
    },
    'POST /v1/sync/blobs': () => {
      const blob = randomBlob();
      return { path: '/v1/sync/blobs', ...sync({ 'Content-Type': BUCKET_TYPE }), rawBody: encodeBucket([{ sha256: blob.sha, bytes: blob.bytes }]) };
    },
    'GET /v1/sync/blobs/{sha256}': () => ({ path: `/v1/sync/blobs/${storedBlob.sha}`, ...sync() }),
    'GET /v1/sync/blobs/{sha256}/upload': () => ({ path: `/v1/sync/blobs/${randomBlob().sha}/upload`, ...sync() }),
    'GET /v1/sync/digest': () => ({ path: '/v1/sync/digest', ...sync() }),
    'GET /v1/sync/status': () => ({ path: '/v1/sync/status' }),
    'POST /v1/sync/run': () => ({ path: '/v1/sync/run' }),
    'GET /v1/devices': () => ({ path: '/v1/devices' }),
    'GET /v1/sync/assigned': () => ({ path: '/v1/sync/assigned', ...sync() }),
    'GET /v1/sync/assignments': () => ({ path: '/v1/sync/assignments' }),
    'POST /v1/sync/assignments': async () => ({ path: '/v1/sync/assignments', body: { study_uid: await studyUid(), device_id: device.device.id } }),
    'DELETE /v1/sync/assignments/{id}': async () => ({ path: `/v1/sync/assignments/${(await assign(t.server.services, { study_uid: await studyUid(), device_id: device.device.id }, 'test')).id}` }),
    'GET /v1/dicom/peers': () => ({ path: '/v1/dicom/peers' }),
    'GET /v1/dicom/sources': () => ({ path: '/v1/dicom/sources' }),
    'POST /v1/dicom/query': async () => ({ path: '/v1/dicom/query', body: { peer: await ownDicomWeb(), level: 'study', filters: { study_uid: imported.studyUid } } }),
    // A study the peer does not have: 202 with a record failed from the start, nothing runs on.
    'POST /v1/dicom/retrieve': async () => ({ path: '/v1/dicom/retrieve', body: { peer: await ownDicomWeb(), study_uid: '1.2.826.0.1.3680043.10.1' } }),
    'GET /v1/dicom/retrieves': () => ({ path: '/v1/dicom/retrieves' }),
    'GET /v1/dicom/retrieves/{id}': async () => ({ path: `/v1/dicom/retrieves/${await retrieveRecord()}` }),
    'POST /v1/dicom/peers': () => ({ path: '/v1/dicom/peers', body: { kind: 'dimse', name: `pacs ${randomBytes(4).toString('hex')}`, ae_title: 'PACS', host: '127.0.0.1', port: 11112 } }),
    'GET /v1/dicom/peers/{id}': async () => ({ path: `/v1/dicom/peers/${(await newPeer()).id}` }),
    'PUT /v1/dicom/peers/{id}': async () => ({ path: `/v1/dicom/peers/${(await newPeer()).id}`, body: { kind: 'dicomweb', name: `web ${randomBytes(4).toString('hex')}`, url: 'http://127.0.0.1:8042/dicom-web' } }),
    'DELETE /v1/dicom/peers/{id}': async () => ({ path: `/v1/dicom/peers/${(await newPeer()).id}` }),
    'GET /v1/dicom/routes': () => ({ path: '/v1/dicom/routes' }),
    'POST /v1/dicom/routes': async () => ({ path: '/v1/dicom/routes', body: { name: `route ${randomBytes(4).toString('hex')}`, event: 'analysis.finished', peer: (await newPeer()).id } }),
    'GET /v1/dicom/routes/{id}': async () => ({ path: `/v1/dicom/routes/${(await newRule()).id}` }),
    'PUT /v1/dicom/routes/{id}': async () => {
      const rule = await newRule();
      return { path: `/v1/dicom/routes/${rule.id}`, body: { name: rule.name, enabled: false, event: 'report.finalized', peer: rule.peer_id } };
    },
    'DELETE /v1/dicom/routes/{id}': async () => ({ path: `/v1/dicom/routes/${(await newRule()).id}` }),
    'GET /v1/dicom/sends': () => ({ path: '/v1/dicom/sends?status=queued' }),
    'GET /v1/dicom/sends/{id}': async () => ({ path: `/v1/dicom/sends/${(await newSend()).id}` }),
    'POST /v1/dicom/sends/{id}/retry': async () => ({ path: `/v1/dicom/sends/${await failedSend()}/retry` }),
    'POST /v1/analyses/{id}/send': async () => ({ path: `/v1/analyses/${await analysisId()}/send`, body: { peer: (await newPeer()).id } }),
    'GET /v1/sync/quarantine': () => ({ path: '/v1/sync/quarantine' }),
    'GET /v1/sync/refused': () => ({ path: '/v1/sync/refused' }),
    'POST /v1/sync/refused/{change_id}/send-again': async () => ({ path: `/v1/sync/refused/${await refusedChange()}/send-again` }),
    'POST /v1/sync/quarantine/{change_id}/release': async () => ({ path: `/v1/sync/quarantine/${await quarantinedVerdict()}/release` }),
    'POST /v1/sync/quarantine/{change_id}/discard': async () => ({ path: `/v1/sync/quarantine/${await quarantinedVerdict()}/discard` }),
    'POST /v1/devices': () => ({ path: '/v1/devices', body: { name: 'reading room 3' } }),
    'DELETE /v1/devices/{device_id}': async () => ({ path: `/v1/devices/${await revocable()}` }),
    'GET /v1/auth/me': () => ({ path: '/v1/auth/me' }),
    'GET /v1/auth/keys': () => ({ path: '/v1/auth/keys' }),
    'POST /v1/auth/keys': () => ({ path: '/v1/auth/keys', body: { name: 'matrix' } }),
    'POST /v1/auth/keys/{id}/rotate': async (caller) => ({ path: `/v1/auth/keys/${await ownKey(caller)}/rotate` }),
    'DELETE /v1/auth/keys/{id}': async (caller) => ({ path: `/v1/auth/keys/${await ownKey(caller)}` }),
    'GET /v1/users': () => ({ path: '/v1/users' }),
    'POST /v1/users': () => ({ path: '/v1/users', body: { email: `u${Math.random().toString(36).slice(2)}@hospital.test`, role: 'radiologist' } }),
    'GET /v1/users/{id}': async () => ({ path: `/v1/users/${await radiologistId()}` }),
    'PATCH /v1/users/{id}': async () => ({ path: `/v1/users/${await radiologistId()}`, body: { name: 'Dr. Matrix' } }),
    'GET /v1/scans': () => ({ path: '/v1/scans' }),
    'GET /v1/studies': () => ({ path: '/v1/studies?q=a' }),
    'GET /v1/scans/{scan_id}': async () => ({ path: `/v1/scans/${await analysedScan()}` }),
    'POST /v1/scans/{scan_id}': async () => ({ path: `/v1/scans/${await analysedScan()}`, body: { status: 'in_review' } }),
    'GET /v1/scan/results': () => ({ path: '/v1/scan/results' }),
    'GET /v1/scans/{scan_id}/results': async () => ({ path: `/v1/scans/${await analysedScan()}/results` }),
    'PATCH /v1/findings/{id}': async () => ({ path: `/v1/findings/${await analysedFindingId()}`, body: { review: 'accepted' } }),
    'POST /v1/scans/{scan_id}/findings': async () => {
      const image = await seedImportedInstance(t);
      const scanRef = ((await t.server.services.db.get('SELECT id FROM scans WHERE scan_id = ?', [image.scanId])) as { id: number }).id;
      await seedAnalysis(t.server.services.db, { scanId: image.scanId, patientId: '', studyUid: '', scanRef }, [{}]);
      return {
        path: `/v1/scans/${image.scanId}/findings`,
        body: { source: 'reader', label: 'tumor_detected', instance_uid: image.instanceUid, location: { x: 1, y: 1, width: 5, height: 5 } },
      };
    },
    'GET /v1/reports': () => ({ path: '/v1/reports' }),
    'GET /reports': () => ({ path: '/reports' }),
    'GET /v1/reports/{id}': async (caller) => ({ path: `/v1/reports/${await newReport(caller)}` }),
    'GET /v1/reports/{id}/sr': async (caller) => ({ path: `/v1/reports/${await signedStoredReport(caller)}/sr` }),
    'POST /v1/reports': async () => ({ path: '/v1/reports', body: { scan_id: await analysedScan() } }),
    'PATCH /v1/reports/{id}': async (caller) => ({
      path: `/v1/reports/${await newReport(caller)}`,
      body: { impression: 'No change.' },
    }),
    'POST /v1/reports/{id}/addenda': async (caller) => ({ path: `/v1/reports/${await finalReport(caller)}/addenda`, body: { text: 'Addendum.' } }),
    'POST /v1/exports': () => ({ path: '/v1/exports', body: { format: 'csv' } }),
    'GET /v1/exports': () => ({ path: '/v1/exports' }),
    'GET /v1/exports/{id}/download': async (caller) => ({
      path: (await createExport(t.server.services, caller.auth, { format: 'json', filters: {}, deidentify: false })).download_url,
    }),
    'POST /v1/imports': () => ({ path: '/v1/imports', body: { path: importFolder } }),
    'GET /v1/imports': () => ({ path: '/v1/imports' }),
    'GET /v1/imports/{id}': () => ({ path: `/v1/imports/${imported.jobId}` }),
    'GET /v1/imports/{id}/events': () => ({ path: `/v1/imports/${imported.jobId}/events` }),
    'POST /v1/instances': () => ({ path: '/v1/instances', rawBody: readFileSync(CT_SMALL), headers: { 'Content-Type': 'application/dicom' } }),
    'GET /v1/scans/{scan_id}/instances': () => ({ path: `/v1/scans/${imported.scanId}/instances` }),
    'GET /v1/instances/{instance_uid}/frames/{frame}/rendered': () => ({ path: `/v1/instances/${imported.instanceUid}/frames/0/rendered` }),
    'GET /v1/instances/{instance_uid}/frames/{frame}/raw': () => ({ path: `/v1/instances/${imported.instanceUid}/frames/0/raw` }),
    'GET /v1/instances/{instance_uid}/tags': () => ({ path: `/v1/instances/${imported.instanceUid}/tags` }),
    'GET /dicom-web/studies': () => ({ path: '/dicom-web/studies' }),
    'GET /dicom-web/series': () => ({ path: '/dicom-web/series' }),
    'GET /dicom-web/instances': () => ({ path: '/dicom-web/instances' }),
    'GET /dicom-web/studies/{study}/series': () => ({ path: `/dicom-web/studies/${imported.studyUid}/series` }),
    'GET /dicom-web/studies/{study}/instances': () => ({ path: `/dicom-web/studies/${imported.studyUid}/instances` }),
    'GET /dicom-web/studies/{study}/series/{series}/instances': () => ({ path: `/dicom-web/studies/${imported.studyUid}/series/${imported.scanId}/instances` }),
    'GET /dicom-web/studies/{study}': () => ({ path: `/dicom-web/studies/${imported.studyUid}` }),
    'GET /dicom-web/studies/{study}/series/{series}': () => ({ path: `/dicom-web/studies/${imported.studyUid}/series/${imported.scanId}` }),
    'GET /dicom-web/studies/{study}/series/{series}/instances/{instance}': () => ({ path: `/dicom-web/studies/${imported.studyUid}/series/${imported.scanId}/instances/${imported.instanceUid}` }),
    'GET /dicom-web/studies/{study}/metadata': () => ({ path: `/dicom-web/studies/${imported.studyUid}/metadata` }),
    'GET /dicom-web/studies/{study}/series/{series}/metadata': () => ({ path: `/dicom-web/studies/${imported.studyUid}/series/${imported.scanId}/metadata` }),
    'GET /dicom-web/studies/{study}/series/{series}/instances/{instance}/metadata': () => ({
      path: `/dicom-web/studies/${imported.studyUid}/series/${imported.scanId}/instances/${imported.instanceUid}/metadata`,
    }),
    'GET /dicom-web/studies/{study}/series/{series}/instances/{instance}/frames/{frames}': () => ({
      path: `/dicom-web/studies/${imported.studyUid}/series/${imported.scanId}/instances/${imported.instanceUid}/frames/1`,
    }),
    'GET /dicom-web/studies/{study}/series/{series}/instances/{instance}/rendered': () => ({
      path: `/dicom-web/studies/${imported.studyUid}/series/${imported.scanId}/instances/${imported.instanceUid}/rendered`,
    }),
    'GET /dicom-web/studies/{study}/series/{series}/instances/{instance}/frames/{frame}/rendered': () => ({
      path: `/dicom-web/studies/${imported.studyUid}/series/${imported.scanId}/instances/${imported.instanceUid}/frames/1/rendered`,
    }),
    'POST /dicom-web/studies': () => ({ path: '/dicom-web/studies', rawBody: stowBody(readFileSync(CT_SMALL)), headers: { 'Content-Type': STOW_TYPE } }),
    'POST /dicom-web/studies/{study}': () => ({
      path: `/dicom-web/studies/${imported.studyUid}`,
      rawBody: stowBody(readFileSync(CT_SMALL)),
      headers: { 'Content-Type': STOW_TYPE },
    }),
    'GET /v1/scans/{scan_id}/thumbnail': () => ({ path: `/v1/scans/${imported.scanId}/thumbnail` }),
    'GET /v1/scans/{scan_id}/measurements': () => ({ path: `/v1/scans/${imported.scanId}/measurements` }),
    'POST /v1/scans/{scan_id}/measurements': () => ({ path: `/v1/scans/${imported.scanId}/measurements`, body: lengthBody }),
    'PATCH /v1/measurements/{id}': async (caller) => ({ path: `/v1/measurements/${await ownMeasurement(caller)}`, body: { points: [[1, 1], [20, 1]] } }),
    'DELETE /v1/measurements/{id}': async (caller) => ({ path: `/v1/measurements/${await ownMeasurement(caller)}` }),
    'GET /v1/models': () => ({ path: '/v1/models' }),
    'POST /v1/models/{id}/select': () => ({ path: '/v1/models/mia-phantom-detector/select' }),
    'POST /v1/models/{id}/operating-point': () => ({ path: `/v1/models/${installOperatingPointModel(t.dataDir)}/operating-point`, body: { name: 'balanced' } }),
    'POST /v1/scans/{scan_id}/analyses': async () => ({ path: `/v1/scans/${await analysedScan()}/analyses`, body: {} }),
    'GET /v1/analyses/{id}': async () => ({ path: `/v1/analyses/${await analysisId()}` }),
    'GET /v1/analyses/{id}/events': async () => ({ path: `/v1/analyses/${await analysisId()}/events` }),
    'GET /v1/analyses/{id}/sr': async () => ({ path: `/v1/analyses/${await storedAnalysis()}/sr` }),
    'DELETE /v1/analyses/{id}': async () => ({ path: `/v1/analyses/${await analysisId()}` }),
    'GET /v1/labels': () => ({ path: '/v1/labels' }),
    'GET /v1/audit': () => ({ path: '/v1/audit' }),
    'GET /v1/openapi.json': () => ({ path: '/v1/openapi.json' }),
    };

}
