/**
 * The SRs mia writes, against a real PACS (Debian's Orthanc): dcmtk's storescu sends the AI
 * result SR and the signed report's SR, Orthanc accepts both, indexes them in the image's study
 * with the patient as mia wrote it (UTF-8), and gives back the very data set mia wrote.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { draftReport, updateReport } from '#server/reports/reports.ts';
import type { ModelVocabularies } from '#server/reports/recommendation.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { startOrthanc, type Orthanc } from '../helpers/orthanc.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis, type SeededScan } from '../helpers/seed.ts';

const run = promisify(execFile);

let t: TestServer;
let orthanc: Orthanc;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-sr-orthanc-'));
  t = await startTestServer();
  orthanc = await startOrthanc({ acceptUnknownCallers: true });
}, 60_000);

afterAll(async () => {
  await orthanc?.stop();
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The data set after the File Meta group, whose length (0002,0000) says where it ends. */
function dataSetOf(file: Uint8Array): Buffer {
  const b = Buffer.from(file);
  expect(b.toString('latin1', 128, 132)).toBe('DICM');
  const groupLength = b.readUInt32LE(132 + 8);
  return b.subarray(132 + 12 + groupLength);
}

async function fetchSr(path: string): Promise<{ bytes: Buffer; uid: string }> {
  const res = await fetch(t.url + path, { headers: { Authorization: `Bearer ${t.adminKey}` } });
  expect(res.status).toBe(200);
  return { bytes: Buffer.from(await res.arrayBuffer()), uid: res.headers.get('x-sop-instance-uid') ?? '' };
}

describe('mia SRs in Orthanc', () => {
  it('are accepted over C-STORE and read back with the data set as written', async () => {
    const imported = await seedImportedInstance(t);
    const db = t.server.services.db;
    const scan = (await db.get(`SELECT s.id AS "scanRef", s.scan_id AS "scanId", p.patient_id AS "patientId", st.study_uid AS "studyUid"
      FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?`, [imported.scanId])) as SeededScan;
    await seedAnalysis(db, scan, [{ instanceUid: imported.instanceUid, x: 20.5, y: 30.25, width: 40, height: 22 }]);
    const analysisId = ((await db.get('SELECT public_id FROM analyses WHERE scan_ref = ?', [scan.scanRef])) as { public_id: string }).public_id;
    const reader = await t.keyFor('radiologist', { email: 'orthanc-reader@hospital.test' });
    const named = await t.request('PATCH', `/v1/users/${reader.userId}`, { body: { name: 'Ørsted^Åse' } });
    expect(named.status, named.text).toBe(200);
    const userRef = ((await db.get('SELECT id FROM users WHERE public_id = ?', [reader.userId])) as { id: number }).id;
    const vocabularies: ModelVocabularies = () => ({ recommendations: null, displayName: (label) => label });
    const draft = await draftReport(t.server.services, vocabularies, userRef, { scanId: scan.scanId, impression: 'Mass, 4 cm.' });
    await updateReport(t.server.services, vocabularies, userRef, draft.id, { status: 'final' });

    const sent = [await fetchSr(`/v1/analyses/${analysisId}/sr`), await fetchSr(`/v1/reports/${draft.id}/sr`)];
    const paths = sent.map((s, i) => {
      const path = join(dir, `sr-${i}.dcm`);
      writeFileSync(path, s.bytes);
      return path;
    });
    try {
      await run('storescu', ['-aet', 'MIA', '-aec', orthanc.aeTitle, '127.0.0.1', String(orthanc.dicomPort), ...paths]);
    } catch (error) {
      throw new Error(`storescu failed: ${(error as { stderr?: string }).stderr ?? String(error)}\n${await orthanc.log()}`);
    }

    for (const s of sent) {
      const found = await orthanc.restJson<Array<{ ID: string; Type: string }>>('/tools/lookup', { method: 'POST', body: s.uid });
      const instance = found.find((f) => f.Type === 'Instance');
      expect(instance, `Orthanc lacks ${s.uid}`).toBeDefined();
      const tags = await orthanc.restJson<Record<string, string>>(`/instances/${instance!.ID}/simplified-tags`);
      expect(tags).toMatchObject({ Modality: 'SR', StudyInstanceUID: scan.studyUid, PatientID: '1CT1', PatientName: 'CompressedSamples^CT1' });
      const stored = new Uint8Array(await (await orthanc.rest(`/instances/${instance!.ID}/file`)).arrayBuffer());
      expect(Buffer.compare(dataSetOf(stored), dataSetOf(s.bytes))).toBe(0);
    }
    // The report's reader, in UTF-8, as Orthanc decodes it.
    const report = await orthanc.restJson<Array<{ ID: string; Type: string }>>('/tools/lookup', { method: 'POST', body: sent[1]!.uid });
    const content = await orthanc.restJson<Record<string, unknown>>(`/instances/${report.find((f) => f.Type === 'Instance')!.ID}/simplified-tags`);
    expect(JSON.stringify(content)).toContain('Ørsted^Åse');
  });
});
