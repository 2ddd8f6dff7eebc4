/**
 * Study-level reading and triage (issue 11) over HTTP on a real SQLite file: GET /v1/studies
 * groups series by study with the patient's name, accession, date and description, searches
 * them, pages and is audited as a PHI read; scans and studies carry a triage priority from the
 * latest analysis's findings and the label urgencies stored with it, which a reader's
 * rejection drops and a later manifest cannot change.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadManifest } from '#server/analysis/manifest.ts';
import { triageLabelsOf } from '#server/analysis/registry.ts';
import type { TriageLabels } from '#server/store/analyses.ts';
import { MODEL_DIR } from '../analysis/helpers.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis, seedScan, uid, type SeededScan } from '../helpers/seed.ts';

type Triage = { priority: string; reason: string | null; finding_id: string | null } | null;
type Study = {
  study_uid: string;
  patient_id: string;
  patient_name: string | null;
  accession_number: string | null;
  study_date: string | null;
  study_description: string | null;
  modalities: string[];
  series_count: number;
  triage: Triage;
  series: { scan_id: string; series_number: number; triage: Triage }[];
};

let t: TestServer;
let reviewer: string;
/** The bundled manifest's label urgencies and names, as an analysis with it stores them. */
let bundled: TriageLabels;

beforeAll(async () => {
  t = await startTestServer();
  reviewer = (await t.keyFor('radiologist', { email: 'triage-reader@hospital.test' })).key;
  bundled = triageLabelsOf(await loadManifest(MODEL_DIR));
});
afterAll(async () => {
  await t.close();
});

const studiesOf = async (query: string, key?: string): Promise<Study[]> => {
  const reply = await t.request('GET', `/v1/studies?${query}`, key === undefined ? {} : { key });
  expect(reply.status).toBe(200);
  return reply.json.data.items as Study[];
};

describe('GET /v1/studies', () => {
  const patientA = `STU-A-${process.pid}`;
  const patientB = `STU-B-${process.pid}`;
  const head = uid();
  let ct: SeededScan;
  let mr: SeededScan;
  let later: SeededScan;
  let other: SeededScan;

  beforeAll(async () => {
    const db = t.server.services.db;
    // Study 1 of patient A: two series, the MR numbered before the CT.
    const study = { uid: head, patientName: 'MÜLLER^HANS^^DR', date: '20260110', description: 'CT/MR head', accession: 'ACC-1001' };
    ct = await seedScan(db, { patientId: patientA, modality: 'CT', description: 'Axial non-contrast', seriesNumber: 3, study });
    mr = await seedScan(db, { patientId: patientA, modality: 'MR', description: 'FLAIR', seriesNumber: 2, study });
    later = await seedScan(db, { patientId: patientA, modality: 'CT', seriesNumber: 1, study: { date: '20260301', description: 'CT head follow-up', accession: 'acc-2002' } });
    other = await seedScan(db, { patientId: patientB, modality: 'MR', seriesNumber: 1, study: { patientName: "O'BRIEN^ANN", date: '20251224', description: 'MR brain', accession: 'X-77' } });
  });

  it('groups series by study with patient name, accession, date, description, modalities and series in series order', async () => {
    const studies = await studiesOf(`patient_id=${patientA}`);
    expect(studies.map((s) => s.study_uid)).toEqual([head, later.studyUid]);
    const [first, second] = studies;
    expect(first).toMatchObject({
      patient_id: patientA,
      patient_name: 'MÜLLER^HANS^^DR',
      accession_number: 'ACC-1001',
      study_date: '20260110',
      study_description: 'CT/MR head',
      modalities: ['CT', 'MR'],
      series_count: 2,
      triage: null,
    });
    expect(first!.series.map((s) => [s.scan_id, s.series_number])).toEqual([
      [mr.scanId, 2],
      [ct.scanId, 3],
    ]);
    expect(second).toMatchObject({ accession_number: 'acc-2002', series_count: 1, modalities: ['CT'] });
    expect(second!.series.map((s) => s.scan_id)).toEqual([later.scanId]);
  });

  it('searches the name case- and accent-insensitively, by every word', async () => {
    for (const q of ['müller', 'MULLER', 'hans muller', 'Müller, Hans']) {
      const found = await studiesOf(`q=${encodeURIComponent(q)}`);
      expect(new Set(found.map((s) => s.patient_id)), q).toEqual(new Set([patientA]));
    }
    expect(await studiesOf(`q=${encodeURIComponent("o'brien")}`)).toEqual([expect.objectContaining({ patient_id: patientB, patient_name: "O'BRIEN^ANN" })]);
    // Every word must match: a name of one patient and the first name of another find nothing.
    expect(await studiesOf('q=muller+ann')).toEqual([]);
    expect(await studiesOf('q=nobody-here')).toEqual([]);
  });

  it('searches the accession number (case-insensitively), the patient ID and the description', async () => {
    expect((await studiesOf('q=acc-1001')).map((s) => s.study_uid)).toEqual([head]);
    expect((await studiesOf('q=ACC-2002')).map((s) => s.study_uid)).toEqual([later.studyUid]);
    expect((await studiesOf(`q=${patientB.toLowerCase()}`)).map((s) => s.study_uid)).toEqual([other.studyUid]);
    expect((await studiesOf(`q=follow-up&patient_id=${patientA}`)).map((s) => s.study_uid)).toEqual([later.studyUid]);
  });

  it('pages with limit and an opaque cursor, without repeats or gaps', async () => {
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const reply = await t.request('GET', `/v1/studies?q=stu-&limit=1${cursor ? `&cursor=${cursor}` : ''}`);
      expect(reply.status).toBe(200);
      expect(reply.json.data.items).toHaveLength(1);
      seen.push(...(reply.json.data.items as Study[]).map((s) => s.study_uid));
      cursor = reply.json.data.next_cursor;
    } while (cursor !== null);
    expect(seen).toEqual([head, later.studyUid, other.studyUid]);
    expect((await t.request('GET', '/v1/studies?limit=0')).status).toBe(400);
    expect((await t.request('GET', '/v1/studies?unknown=1')).status).toBe(400);
    expect((await t.request('GET', `/v1/studies?q=${'x'.repeat(65)}`)).status).toBe(400);
  });

  it('needs a key with read:scans', async () => {
    const none = await t.request('GET', '/v1/studies', { key: null });
    expect(none.status).toBe(401);
    // Every role holds read:scans by default; the data engineer's key reads studies too.
    const engineer = (await t.keyFor('data_engineer', { email: 'studies-engineer@hospital.test' })).key;
    expect((await t.request('GET', '/v1/studies', { key: engineer })).status).toBe(200);
  });

  it('is audited as studies.list with every patient it returned, without the words searched', async () => {
    await studiesOf('q=m%C3%BCller');
    const auditor = (await t.keyFor('admin', { email: 'studies-auditor@hospital.test' })).key;
    const events = (await t.request('GET', `/v1/audit?action=studies.list&patient_id=${patientA}&order=newest&limit=5`, { key: auditor })).json.data.items;
    expect(events[0]).toMatchObject({ action: 'studies.list', outcome: 'success', target: 'filter:q=redacted' });
    expect(events[0].patient_ids).toEqual([patientA]);
    expect(JSON.stringify(events)).not.toMatch(/m(ü|%C3%BC)ller/i);
  });
});

describe('triage', () => {
  const patient = `TRI-${process.pid}`;
  const scanOf = async (scanId: string) => (await t.request('GET', `/v1/scans/${scanId}`)).json.data as { triage: Triage; ai_summary: { label: string; confidence: number; review: string | null } | null };
  const findingIds = async (scanId: string): Promise<string[]> =>
    ((await t.request('GET', `/v1/scans/${scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data.findings as { id: string }[]).map((f) => f.id);

  it('a haemorrhage at or above its threshold makes the scan urgent, with the reason; a rejection drops it, accepting keeps it', async () => {
    const scan = await seedScan(t.server.services.db, { patientId: patient, modality: 'CT' });
    await seedAnalysis(
      t.server.services.db,
      scan,
      [
        { label: 'hemorrhage_detected', confidence: 0.91 },
        { label: 'tumor_detected', confidence: 0.8 },
      ],
      { thresholds: { hemorrhage_detected: 0.65, tumor_detected: 0.45 }, triageLabels: bundled },
    );
    const [haemorrhage, tumour] = await findingIds(scan.scanId);
    expect((await scanOf(scan.scanId)).triage).toEqual({ priority: 'urgent', reason: 'Intracranial haemorrhage 91%', finding_id: haemorrhage });

    const review = (id: string | undefined, verdict: string | null) => t.request('PATCH', `/v1/findings/${id}`, { key: reviewer, body: { review: verdict } });
    expect((await review(haemorrhage, 'accepted')).status).toBe(200);
    expect((await scanOf(scan.scanId)).triage).toMatchObject({ priority: 'urgent', reason: 'Intracranial haemorrhage 91%, accepted' });
    expect((await review(haemorrhage, 'rejected')).status).toBe(200);
    expect((await scanOf(scan.scanId)).triage).toEqual({ priority: 'soon', reason: 'Mass / tumour 80%', finding_id: tumour });
    // The AI summary still names the model's top finding, with the reader's verdict beside it.
    expect((await scanOf(scan.scanId)).ai_summary).toMatchObject({ label: 'hemorrhage_detected', confidence: 0.91, review: 'rejected' });
    expect((await review(tumour, 'rejected')).status).toBe(200);
    expect((await scanOf(scan.scanId)).triage).toEqual({ priority: 'routine', reason: null, finding_id: null });
    // The study shows its most urgent series, and the list the same as the single read.
    const [study] = await studiesOf(`patient_id=${patient}`);
    expect(study!.triage).toEqual({ priority: 'routine', reason: null, finding_id: null });
  });

  it('findings below their threshold do not raise the priority; no analysis means no triage', async () => {
    const unread = await seedScan(t.server.services.db, { patientId: `${patient}-2`, modality: 'CT' });
    expect((await scanOf(unread.scanId)).triage).toBeNull();
    const faint = await seedScan(t.server.services.db, { patientId: `${patient}-2`, modality: 'CT', study: { uid: unread.studyUid } });
    await seedAnalysis(t.server.services.db, faint, [{ label: 'hemorrhage_detected', confidence: 0.6 }], { thresholds: { hemorrhage_detected: 0.65 }, triageLabels: bundled });
    expect((await scanOf(faint.scanId)).triage).toEqual({ priority: 'routine', reason: null, finding_id: null });
    const clean = await seedScan(t.server.services.db, { patientId: `${patient}-2`, modality: 'MR', study: { uid: unread.studyUid } });
    await seedAnalysis(t.server.services.db, clean, [], { triageLabels: bundled });
    expect((await scanOf(clean.scanId)).triage).toEqual({ priority: 'routine', reason: null, finding_id: null });
    const [study] = await studiesOf(`patient_id=${patient}-2`);
    expect(study).toMatchObject({ series_count: 3, triage: { priority: 'routine', reason: null } });
  });

  it('GET /v1/models shows the urgency each label declares', async () => {
    const model = ((await t.request('GET', '/v1/models')).json.data.items as { id: string; labels: { label: string; urgency: string }[] }[]).find((m) => m.id === 'mia-phantom-detector');
    expect(Object.fromEntries(model!.labels.map((l) => [l.label, l.urgency]))).toEqual({ tumor_detected: 'soon', hemorrhage_detected: 'urgent', infarct_detected: 'urgent' });
  });

  it('the study takes its most urgent series; the urgency stored with the analysis wins over any manifest since', async () => {
    const db = t.server.services.db;
    const routine = await seedScan(db, { patientId: `${patient}-3`, modality: 'MR', seriesNumber: 1 });
    await seedAnalysis(db, routine, [{ label: 'tumor_detected', confidence: 0.7 }], { thresholds: { tumor_detected: 0.45 }, triageLabels: { tumor_detected: { urgency: 'routine', display_name: 'Mass' } } });
    const infarct = await seedScan(db, { patientId: `${patient}-3`, modality: 'CT', seriesNumber: 2, study: { uid: routine.studyUid } });
    // Stored when the analysis ran: infarct urgent. The installed manifest is not consulted.
    await seedAnalysis(db, infarct, [{ label: 'infarct_detected', confidence: 0.77 }], { thresholds: { infarct_detected: 0.55 }, triageLabels: { infarct_detected: { urgency: 'urgent', display_name: 'Acute infarct' } } });
    const legacy = await seedScan(db, { patientId: `${patient}-3`, modality: 'CT', seriesNumber: 3, study: { uid: routine.studyUid } });
    // An analysis without stored urgencies (another model before triage): routine.
    await seedAnalysis(db, legacy, [{ label: 'hemorrhage_detected', confidence: 0.99 }], { thresholds: { hemorrhage_detected: 0.5 } });
    const [study] = await studiesOf(`patient_id=${patient}-3`);
    expect(study!.series.map((s) => s.triage?.priority)).toEqual(['routine', 'urgent', 'routine']);
    expect(study!.triage).toMatchObject({ priority: 'urgent', reason: 'Acute infarct 77%' });
    const scans = (await t.request('GET', `/v1/scans?patient_id=${patient}-3`)).json.data.items as { scan_id: string; triage: Triage }[];
    expect(scans.find((s) => s.scan_id === infarct.scanId)?.triage?.priority).toBe('urgent');
  });
});
