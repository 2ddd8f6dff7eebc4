/**
 * The query/retrieve API at its edge, on both backends (issue 14, item 2): what a search and a
 * retrieve refuse and why, what readers see of the peers, and a real round through mia's own
 * DICOMweb server as the peer (QIDO-RS search, WADO-RS retrieve of a study it already holds).
 * The same against Orthanc, by C-FIND/C-MOVE too: test/dicom-net/query-retrieve.test.ts.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { insertRetrieve } from '#server/store/retrieves.ts';
import { seedImportedInstance, type SeededInstance } from '../helpers/image-fixture.ts';
import { onPostgres, startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let reader: string;
let imported: SeededInstance;
const ids = { node: '', self: '' };

beforeAll(async () => {
  t = await startTestServer();
  reader = (await t.keyFor('radiologist')).key;
  imported = await seedImportedInstance(t);
  const node = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dimse', name: 'pacs', ae_title: 'PACS', host: '127.0.0.1', port: 11112 } });
  const self = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dicomweb', name: 'self', url: `${t.url}/dicom-web`, authorization: `Bearer ${t.adminKey}` } });
  ids.node = node.json.data.id;
  ids.self = self.json.data.id;
});
afterAll(async () => {
  await t.close();
});

describe('query/retrieve API', () => {
  it('names peers to readers without hosts, URLs or credentials', async () => {
    const reply = await t.request('GET', '/v1/dicom/sources', { key: reader });
    expect(reply.json.data.items).toEqual([
      { id: ids.node, name: 'pacs', kind: 'dimse' },
      { id: ids.self, name: 'self', kind: 'dicomweb' },
    ]);
    expect(reply.text).not.toContain('127.0.0.1');
    expect(reply.text).not.toContain('Bearer');
  });

  it.each([
    [{ peer: 'self', level: 'series', filters: {} }, 'filters.study_uid'],
    [{ peer: 'self', level: 'patient', filters: { modality: 'CT' } }, 'filters.modality'],
    [{ peer: 'self', filters: { patient_name: 'DOE\\SMITH' } }, 'filters.patient_name'],
    [{ peer: 'self', filters: { study_date_from: '2024-02-30' } }, 'filters.study_date_from'],
    [{ peer: 'self', filters: { study_date_from: '2024-03-01', study_date_to: '2024-01-01' } }, 'filters.study_date_to'],
    [{ peer: 'self', filters: { modality: 'ct scan' } }, 'filters.modality'],
    [{ peer: 'self', limit: 5000 }, 'limit'],
    [{ peer: 'self', filters: { hostile: 'x' } }, 'hostile: unknown field'],
  ])('refuses a search %j, naming %s', async (body, field) => {
    const reply = await t.request('POST', '/v1/dicom/query', { key: reader, body });
    expect(reply.status, reply.text).toBe(400);
    expect(reply.json.error.details).toContain(field);
  });

  it.each([
    [{ peer: 'self' }, 'study_uid'],
    [{ peer: 'self', study_uid: '1.2.3', priors_of_patient_id: 'P1' }, 'study_uid'],
    [{ peer: 'self', series_uid: '1.2.3.4' }, 'study_uid'],
    [{ peer: 'self', priors_of_patient_id: 'P*' }, 'priors_of_patient_id'],
    [{ peer: 'self', study_uid: '1.2.3', before: '2024-01-01' }, 'before'],
    [{ peer: 'self', study_uid: 'not-a-uid' }, 'study_uid'],
  ])('refuses a retrieve %j, naming %s', async (body, field) => {
    const reply = await t.request('POST', '/v1/dicom/retrieve', { body });
    expect(reply.status, reply.text).toBe(400);
    expect(reply.json.error.details).toContain(field);
  });

  it('refuses a C-MOVE retrieve while mia has no DICOM listener, saying what to set up', async () => {
    const reply = await t.request('POST', '/v1/dicom/retrieve', { body: { peer: 'pacs', study_uid: imported.studyUid } });
    expect(reply.status).toBe(409);
    expect(reply.json.error.message).toBe('mia has no DICOM listener to receive a C-MOVE');
    expect(reply.json.error.details).toContain('--dicom-port');
    const unknown = await t.request('POST', '/v1/dicom/query', { key: reader, body: { peer: 'nobody' } });
    expect(unknown.status).toBe(404);
  });

  it('marks a retrieve whose process is gone as interrupted, keeping what its studies had reached', async () => {
    const studies = [{ study_uid: '1.2.3', series_uid: null, study_date: '20240101', description: '', modalities: ['CT'], expected_instances: 4, status: 'running', completed: 2, failed: 0, warning: 0, remaining: 2, import_jobs: [], error: null }];
    // A node row that does not exist: the process that ran it stopped (or was killed).
    const row = await insertRetrieve(t.server.services.db, {
      peer_id: ids.node, peer_name: 'pacs', method: 'c-move', target_kind: 'study', study_uid: '1.2.3', series_uid: null, patient_id: 'P1', options: '{}',
      status: 'running', studies: JSON.stringify(studies), error: null, owner_node: 987_654, owner_pid: 1, created_by: 'test', at: t.clock.now().toISOString(),
    });
    await t.server.runtime.retrieves.sweep();
    const swept = (await t.request('GET', `/v1/dicom/retrieves/${row.public_id}`, { key: reader })).json.data;
    expect(swept).toMatchObject({ status: 'interrupted', error: expect.stringMatching(/^mia stopped before the retrieve finished; retrieve again/) });
    expect(swept.studies[0]).toMatchObject({ status: 'failed', error: 'interrupted', completed: 2, remaining: 2 });
  });

  it('searches and retrieves through a DICOMweb server (mia itself): found, in the archive, duplicates', async () => {
    const found = await t.request('POST', '/v1/dicom/query', { key: reader, body: { peer: 'self', filters: { study_uid: imported.studyUid } } });
    expect(found.status, found.text).toBe(200);
    expect(found.json.data).toMatchObject({ source: { id: ids.self, name: 'self', kind: 'dicomweb' }, level: 'study', capped: false, limit: 100 });
    expect(found.json.data.items).toEqual([expect.objectContaining({ level: 'study', study_uid: imported.studyUid, in_archive: true, instance_count: 1 })]);

    const started = await t.request('POST', '/v1/dicom/retrieve', { body: { peer: ids.self, study_uid: imported.studyUid } });
    expect(started.status, started.text).toBe(202);
    expect(started.json.data).toMatchObject({ method: 'wado-rs', status: 'running', target: { kind: 'study', study_uid: imported.studyUid } });
    await t.server.runtime.retrieves.idle();
    const done = await t.request('GET', `/v1/dicom/retrieves/${started.json.data.id}`, { key: reader });
    expect(done.json.data).toMatchObject({ status: 'completed', error: null, counts: { completed: 1, failed: 0, warning: 0 } });
    expect(done.json.data.studies[0]).toMatchObject({ status: 'completed', completed: 1, remaining: 0 });

    const list = await t.request('GET', '/v1/dicom/retrieves?status=completed', { key: reader });
    expect(list.json.data.items.map((r: { id: string }) => r.id)).toContain(started.json.data.id);
    const audit = await t.request('GET', '/v1/audit?action=dicom.retrieve&order=newest');
    expect(audit.json.data.items.map((e: { target: string }) => e.target)).toContain(`retrieve:${started.json.data.id}`);
  });

  it('writes a retrieve\'s end again when writing it fails, instead of leaving it running', async () => {
    const db = t.server.services.db;
    // A trigger refuses the write that ends a retrieve, as a full disk or a locked database would.
    if (onPostgres()) {
      await db.run(`CREATE FUNCTION refuse_end() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$`);
      await db.run('CREATE TRIGGER refuse_end BEFORE UPDATE ON retrieves FOR EACH ROW WHEN (NEW.finished_at IS NOT NULL) EXECUTE FUNCTION refuse_end()');
    } else {
      await db.run(`CREATE TRIGGER refuse_end BEFORE UPDATE ON retrieves WHEN NEW.finished_at IS NOT NULL BEGIN SELECT RAISE(ABORT, 'disk full'); END`);
    }
    const log = join(t.dataDir, 'logs', 'mia.log');
    const unsaved = (id: string): Record<string, unknown>[] =>
      readFileSync(log, 'utf8')
        .split('\n')
        .filter((line) => line.includes('"event":"retrieve.end_not_saved"'))
        .map((line) => JSON.parse(line) as Record<string, unknown>)
        .filter((event) => event['retrieve_id'] === id);
    let id = '';
    try {
      const reply = await t.request('POST', '/v1/dicom/retrieve', { body: { peer: ids.self, study_uid: imported.studyUid } });
      expect(reply.status, reply.text).toBe(202);
      id = (reply.json.data as { id: string }).id;
      await expect.poll(() => unsaved(id).length, { timeout: 10_000 }).toBeGreaterThan(0);
      expect(unsaved(id)[0]).toMatchObject({ status: 'completed', retry_in_ms: 1000 });
      expect((await t.request('GET', `/v1/dicom/retrieves/${id}`, { key: reader })).json.data.status).toBe('running');
    } finally {
      await db.run(onPostgres() ? 'DROP TRIGGER refuse_end ON retrieves' : 'DROP TRIGGER refuse_end');
      if (onPostgres()) await db.run('DROP FUNCTION refuse_end');
    }
    await t.server.runtime.retrieves.idle();
    const done = await t.request('GET', `/v1/dicom/retrieves/${id}`, { key: reader });
    expect(done.json.data).toMatchObject({ status: 'completed', error: null, counts: { completed: 1, failed: 0, warning: 0 } });
  });
});
