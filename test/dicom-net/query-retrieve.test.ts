/**
 * Searching a PACS and retrieving from it through mia's HTTP API (issue 14, item 2), against a
 * real Orthanc holding two patients' studies: C-FIND at patient, study and series level and
 * C-MOVE to mia's own SCP (a DICOM node peer), QIDO-RS and WADO-RS through Orthanc's DICOMweb
 * plugin (a DICOMweb peer). What arrives is what Orthanc holds; an unknown study ends failed
 * naming it; a peer that is down is an error at once and nothing is stored.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRetrieve } from '#server/query-retrieve/retrieves.ts';
import { freePort, orthancInstalled, startOrthanc, type Orthanc } from '../helpers/orthanc.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { dataSetOffset, mia, run, sha256, waitFor } from './dimse-harness.ts';

type Fixture = { file: string; patient_id: string; study: string; series: string; sop_instance: string; study_date: string; modality: string };

const MIA_AE = 'MIA';
const TAG = 'qr';
let work: string;
let t: TestServer;
let orthanc: Orthanc;
let fixtures: Fixture[] = [];
let reader: string;
const peers = { dimse: '', web: '' };

const PATIENT_A = `QR-${TAG}-A`;
const PATIENT_B = `QR-${TAG}-B`;
const studyOf = (date: string): string => fixtures.find((f) => f.study_date === date)?.study ?? '';
const instancesOf = (study: string): Fixture[] => fixtures.filter((f) => f.study === study);

async function heldBy(peer: Orthanc, sopInstanceUid: string): Promise<Buffer> {
  const found = (await peer.restJson<Array<{ ID: string; Type: string }>>('/tools/lookup', { method: 'POST', body: sopInstanceUid })).find((r) => r.Type === 'Instance');
  if (!found) throw new Error(`Orthanc lacks ${sopInstanceUid}`);
  return Buffer.from(await (await peer.rest(`/instances/${found.ID}/file`)).arrayBuffer());
}

/** The data set of mia's archived file of an instance (its meta header is mia's own after C-MOVE). */
async function archived(sopInstanceUid: string): Promise<Buffer | null> {
  const row = await t.server.services.db.get<{ file_path: string }>('SELECT file_path FROM instances WHERE sop_instance_uid = ?', [sopInstanceUid]);
  if (!row) return null;
  return readFileSync(isAbsolute(row.file_path) ? row.file_path : join(t.dataDir, row.file_path));
}

const dataSet = (file: Buffer): string => sha256(file.subarray(dataSetOffset(file)));

async function expectSameAsOrthanc(study: string): Promise<void> {
  for (const f of instancesOf(study)) {
    const mine = await archived(f.sop_instance);
    expect(mine, `mia lacks ${f.sop_instance}`).not.toBeNull();
    expect(dataSet(mine as Buffer)).toBe(dataSet(await heldBy(orthanc, f.sop_instance)));
  }
}

async function finished(id: string): Promise<any> {
  let record: any;
  await waitFor(async () => {
    record = (await t.request('GET', `/v1/dicom/retrieves/${id}`, { key: reader })).json.data;
    return record.status !== 'running';
  }, `retrieve ${id}`, 60_000);
  return record;
}

async function retrieve(body: Record<string, unknown>): Promise<any> {
  const reply = await t.request('POST', '/v1/dicom/retrieve', { body });
  expect(reply.status, reply.text).toBe(202);
  return reply.json.data;
}

describe.skipIf(!orthancInstalled())('search and retrieve from a PACS through the API', () => {
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'mia-qr-'));
    const port = await freePort();
    t = await startTestServer({ dicom: { port, host: '127.0.0.1', aeTitle: MIA_AE } });
    orthanc = await startOrthanc({ modalities: { mia: { aeTitle: MIA_AE, host: '127.0.0.1', port } } });
    const made = await run('/usr/bin/python3', [join(import.meta.dirname, 'qr_fixtures.py'), work, TAG]);
    if (made.status !== 0) throw new Error(made.stderr);
    fixtures = JSON.parse(made.stdout) as Fixture[];
    for (const f of fixtures) await orthanc.rest('/instances', { method: 'POST', body: readFileSync(f.file) });
    // Orthanc calls mia's SCP for the C-MOVE sub-operations: it is a peer allowed to call in.
    const dimse = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dimse', name: 'pacs', ae_title: orthanc.aeTitle, host: '127.0.0.1', port: orthanc.dicomPort, allow_incoming: true } });
    const web = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dicomweb', name: 'pacs-web', url: orthanc.dicomWebUrl } });
    expect(dimse.status, dimse.text).toBe(201);
    expect(web.status, web.text).toBe(201);
    peers.dimse = dimse.json.data.id;
    peers.web = web.json.data.id;
    reader = (await t.keyFor('radiologist')).key;
  });

  afterAll(async () => {
    await orthanc?.stop();
    await t?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('lists the peers to a reader by name and kind only', async () => {
    const reply = await t.request('GET', '/v1/dicom/sources', { key: reader });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json.data.items).toEqual([
      { id: peers.dimse, name: 'pacs', kind: 'dimse' },
      { id: peers.web, name: 'pacs-web', kind: 'dicomweb' },
    ]);
  });

  it.each(['pacs', 'pacs-web'])('searches %s at patient, study and series level with the same filters', async (peer) => {
    const query = async (body: Record<string, unknown>) => {
      const reply = await t.request('POST', '/v1/dicom/query', { key: reader, body: { peer, ...body } });
      expect(reply.status, reply.text).toBe(200);
      return reply.json.data;
    };
    const patients = await query({ level: 'patient', filters: { patient_name: 'ALPHA*' } });
    expect(patients.items).toEqual([expect.objectContaining({ level: 'patient', patient_id: PATIENT_A, patient_name: 'ALPHA^ANNA', studies: 3 })]);

    const studies = await query({ level: 'study', filters: { patient_id: PATIENT_A } });
    expect(studies.items.map((s: any) => s.study_date).sort()).toEqual(['20200115', '20220510', '20240301']);
    expect(studies.items.find((s: any) => s.study_date === '20240301')).toMatchObject({
      study_uid: studyOf('20240301'),
      patient_name: 'ALPHA^ANNA',
      description: 'CT CHEST',
      modalities: ['CT'],
      series_count: 2,
      instance_count: 5,
      in_archive: false,
    });
    expect(studies.capped).toBe(false);

    const dated = await query({ level: 'study', filters: { patient_name: '*A*', study_date_from: '2022-01-01', study_date_to: '2023-12-31' } });
    expect(dated.items.map((s: any) => s.study_uid).sort()).toEqual([studyOf('20220510'), studyOf('20230707')].sort());
    const mr = await query({ level: 'study', filters: { patient_id: `QR-${TAG}-*`, modality: 'MR' } });
    expect(mr.items.map((s: any) => s.patient_id).sort()).toEqual([PATIENT_A, PATIENT_B]);
    const capped = await query({ level: 'study', filters: { patient_id: `QR-${TAG}-*` }, limit: 2 });
    expect(capped.items).toHaveLength(2);
    expect(capped.capped).toBe(true);

    const series = await query({ level: 'series', filters: { study_uid: studyOf('20240301') } });
    expect(series.items.map((s: any) => [s.series_number, s.modality, s.instance_count]).sort()).toEqual([[1, 'CT', 3], [2, 'CT', 2]]);
  });

  it('retrieves a study by C-MOVE into the archive, with the bytes Orthanc holds, and the worklist shows it', async () => {
    const study = studyOf('20240301');
    const started = await retrieve({ peer: 'pacs', study_uid: study });
    expect(started).toMatchObject({ method: 'c-move', status: 'running', target: { kind: 'study', study_uid: study, patient_id: PATIENT_A } });
    const done = await finished(started.id);
    expect(done.status, done.error).toBe('completed');
    expect(done.counts).toEqual({ completed: 5, failed: 0, warning: 0 });
    expect(done.studies).toEqual([expect.objectContaining({ study_uid: study, status: 'completed', completed: 5, failed: 0, expected_instances: 5, error: null })]);
    expect(done.studies[0].import_jobs.length).toBeGreaterThan(0);
    const job = await t.request('GET', `/v1/imports/${done.studies[0].import_jobs[0]}`);
    expect(job.json.data.counts.imported).toBe(5);
    await expectSameAsOrthanc(study);

    const worklist = await t.request('GET', `/v1/studies?patient_id=${PATIENT_A}`, { key: reader });
    expect(worklist.json.data.items.map((s: any) => s.study_uid)).toEqual([study]);
    const again = await t.request('POST', '/v1/dicom/query', { key: reader, body: { peer: 'pacs', filters: { study_uid: study } } });
    expect(again.json.data.items[0].in_archive).toBe(true);
  });

  it("retrieves a patient's priors by C-MOVE: only studies before the day, of the modalities asked", async () => {
    const started = await retrieve({ peer: peers.dimse, priors_of_patient_id: PATIENT_A, before: '2024-03-01' });
    expect(started.studies.map((s: any) => s.study_date)).toEqual(['20220510', '20200115']);
    const done = await finished(started.id);
    expect(done.status, done.error).toBe('completed');
    expect(done.counts.completed).toBe(4);
    expect(done.studies.map((s: any) => s.status)).toEqual(['completed', 'completed']);
    await expectSameAsOrthanc(studyOf('20220510'));
    await expectSameAsOrthanc(studyOf('20200115'));

    const ctOnly = await retrieve({ peer: 'pacs', priors_of_patient_id: PATIENT_A, before: '2024-03-02', modalities: ['MR'] });
    expect(ctOnly.studies.map((s: any) => s.study_date)).toEqual(['20220510']);
    // Already here: every sub-operation succeeds again and nothing is stored twice.
    expect((await finished(ctOnly.id)).status).toBe('completed');
    const count = await t.server.services.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM instances');
    expect(Number(count?.n)).toBe(9);
  });

  it('says when mia does not let the PACS call in with the instances of a C-MOVE', async () => {
    const closed = await t.request('PUT', `/v1/dicom/peers/${peers.dimse}`, { body: { kind: 'dimse', name: 'pacs', ae_title: orthanc.aeTitle, host: '127.0.0.1', port: orthanc.dicomPort, allow_incoming: false } });
    expect(closed.status, closed.text).toBe(200);
    try {
      const done = await finished((await retrieve({ peer: 'pacs', study_uid: studyOf('20230707') })).id);
      expect(done.status).toBe('failed');
      expect(done.error).toMatch(/^mia does not let pacs \(AE ORTHANC\) call in, and a C-MOVE's instances come on an association it opens: allow incoming on the peer \(Admin, DICOM peers\) or mia serve --dicom-allow ORTHANC@127\.0\.0\.1 \(pacs ended the move with status 0x[0-9A-F]{4}\)$/);
      expect(await archived(instancesOf(studyOf('20230707'))[0]?.sop_instance ?? '')).toBeNull();
    } finally {
      await t.request('PUT', `/v1/dicom/peers/${peers.dimse}`, { body: { kind: 'dimse', name: 'pacs', ae_title: orthanc.aeTitle, host: '127.0.0.1', port: orthanc.dicomPort, allow_incoming: true } });
    }
  });

  it('retrieves through Orthanc\'s DICOMweb (QIDO-RS, then WADO-RS into the import pipeline)', async () => {
    const study = studyOf('20230707');
    const started = await retrieve({ peer: 'pacs-web', study_uid: study });
    expect(started).toMatchObject({ method: 'wado-rs', target: { patient_id: PATIENT_B } });
    const done = await finished(started.id);
    expect(done.status, JSON.stringify(done.studies)).toBe('completed');
    expect(done.studies[0]).toMatchObject({ completed: 2, failed: 0, remaining: 0 });
    expect(done.studies[0].import_jobs).toHaveLength(1);
    await expectSameAsOrthanc(study);

    // The same study again by C-MOVE: the copies come with other file meta bytes but the same
    // data sets, so mia's SCP takes them as duplicates and the move completes.
    const moved = await finished((await retrieve({ peer: 'pacs', study_uid: study })).id);
    expect(moved.status, JSON.stringify(moved.studies)).toBe('completed');
    expect(moved.studies[0]).toMatchObject({ completed: 2, failed: 0 });
    await expectSameAsOrthanc(study);

    const one = fixtures.find((f) => f.study === studyOf('20240301') && f.series.length > 0);
    const series = await retrieve({ peer: 'pacs-web', study_uid: one?.study, series_uid: one?.series });
    expect(series.target).toMatchObject({ kind: 'series', series_uid: one?.series });
    // C-MOVE brought these before, with mia's own file meta header: the same data sets, held already.
    const seriesDone = await finished(series.id);
    expect(seriesDone.status, JSON.stringify(seriesDone)).toBe('completed');
    expect(seriesDone.counts).toEqual({ completed: 3, failed: 0, warning: 0 });
  });

  it('ends a retrieve of a study the peer does not have as failed, naming it', async () => {
    for (const peer of ['pacs', 'pacs-web']) {
      const record = await retrieve({ peer, study_uid: '1.2.826.0.1.3680043.10.1015.404' });
      expect(record.status).toBe('failed');
      expect(record.error).toBe(`study 1.2.826.0.1.3680043.10.1015.404 is not on ${peer}`);
      expect(record.studies).toEqual([]);
    }
  });

  it('answers a clear error when the peer is down, and records and stores nothing', async () => {
    const downPort = await freePort();
    const down = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dimse', name: 'pacs-down', ae_title: 'DOWN', host: '127.0.0.1', port: downPort } });
    const downWeb = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dicomweb', name: 'web-down', url: `http://127.0.0.1:${downPort}/dicom-web` } });
    expect(down.status).toBe(201);
    expect(downWeb.status).toBe(201);
    const before = (await t.request('GET', '/v1/dicom/retrieves?limit=500')).json.data.items.length;
    const instances = await t.server.services.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM instances');

    const query = await t.request('POST', '/v1/dicom/query', { key: reader, body: { peer: 'pacs-down', filters: { patient_id: PATIENT_A } } });
    expect(query.status).toBe(422);
    expect(query.json.error.message).toBe('pacs-down is not reachable');
    expect(query.json.error.details).toContain('ECONNREFUSED');
    const move = await t.request('POST', '/v1/dicom/retrieve', { body: { peer: 'pacs-down', study_uid: studyOf('20240301') } });
    expect(move.status).toBe(422);
    expect(move.json.error.message).toBe('pacs-down is not reachable');
    const web = await t.request('POST', '/v1/dicom/retrieve', { body: { peer: 'web-down', study_uid: studyOf('20240301') } });
    expect(web.status).toBe(422);
    expect(web.json.error.message).toBe('DICOMweb server unreachable');

    expect((await t.request('GET', '/v1/dicom/retrieves?limit=500')).json.data.items).toHaveLength(before);
    expect(await t.server.services.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM instances')).toEqual(instances);
  });

  it('does the same from the command line: peers, find --peer, retrieve priors', async () => {
    const data = ['--data', t.dataDir];
    const added = await mia(['dicom', 'peers', 'add', ...data, '--name', 'cli-web', '--url', orthanc.dicomWebUrl, '--authorization', 'Basic dGVzdDp0ZXN0']);
    expect(added.status, added.stderr).toBe(0);
    const listed = await mia(['dicom', 'peers', 'list', ...data]);
    expect(listed.stdout).toMatch(/cli-web +dicomweb/);
    expect(listed.stdout).not.toContain('dGVzdDp0ZXN0');
    const bad = await mia(['dicom', 'peers', 'add', ...data, '--name', 'bad', '--ae-title', 'X', '--host', '127.0.0.1']);
    expect(bad.status).toBe(1);
    expect(bad.stderr).toContain('--port');

    const found = await mia(['dicom', 'find', ...data, '--peer', 'pacs', '--level', 'STUDY', '--patient-id', PATIENT_B]);
    expect(found.status, found.stderr).toBe(0);
    expect(found.stdout).toContain(studyOf('20230707'));

    // (The CT prior came by C-MOVE before: its instances arrive again and are duplicates.)
    const retrieved = await mia(['dicom', 'retrieve', ...data, '--peer', 'pacs', '--priors', PATIENT_A, '--before', '2024-03-01', '--modality', 'CT']);
    expect(retrieved.status, retrieved.stderr).toBe(0);
    expect(retrieved.stdout).toContain(studyOf('20200115'));
    expect(retrieved.stderr).toMatch(/completed: 2 instance\(s\) completed, 0 failed/);
    // The record is the one the screen lists.
    const list = (await t.request('GET', '/v1/dicom/retrieves', { key: reader })).json.data.items;
    expect(list[0]).toMatchObject({ status: 'completed', created_by: 'cli', target: { kind: 'priors', patient_id: PATIENT_A, modalities: ['CT'] } });

    const unknown = await mia(['dicom', 'retrieve', ...data, '--peer', 'pacs', '--study', '1.2.3.4']);
    expect(unknown.status).toBe(1);
    expect(unknown.stderr).toContain('study 1.2.3.4 is not on pacs');
    const removed = await mia(['dicom', 'peers', 'remove', ...data, 'cli-web']);
    expect(removed.status, removed.stderr).toBe(0);
  });

  it('names the likely cause when the PACS refuses an AE title it does not know', async () => {
    const port = await freePort();
    const stranger = await startTestServer({ dicom: { port, host: '127.0.0.1', aeTitle: 'STRANGER' } });
    try {
      await stranger.request('POST', '/v1/dicom/peers', { body: { kind: 'dimse', name: 'pacs', ae_title: orthanc.aeTitle, host: '127.0.0.1', port: orthanc.dicomPort } });
      const reply = await stranger.request('POST', '/v1/dicom/query', { body: { peer: 'pacs', filters: { patient_id: PATIENT_A } } });
      expect(reply.status).toBe(422);
      expect(reply.json.error.message).toMatch(/^pacs (aborted|rejected) the association$/);
      expect(reply.json.error.details).toContain("a PACS that does not know mia's AE title STRANGER as a DICOM node refuses it this way");
    } finally {
      await stranger.close();
    }
  });

  it('names the fix when the PACS does not know mia as a move destination', async () => {
    // Orthanc knows the caller (MIA) but not the AE title the instances should go to.
    const record = await startRetrieve(t.server.runtime, t.server.runtime.retrieves, { peer: 'pacs', study_uid: studyOf('20230707') }, 'test', { aeTitle: 'NOWHERE', port: 11112 });
    await t.server.runtime.retrieves.idle();
    const done = (await t.request('GET', `/v1/dicom/retrieves/${record.id}`)).json.data;
    expect(done.status).toBe('failed');
    // Orthanc says 0xC000 (unable to process), not the standard's 0xA801.
    expect(done.error).toBe("pacs could not process the move (status 0xC000); a PACS that does not know mia's AE title NOWHERE as a move destination answers so: add NOWHERE, this host and port 11112 to pacs's DICOM nodes");
  });
});
