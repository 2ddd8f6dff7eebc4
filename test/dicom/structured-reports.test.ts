/**
 * AI results and signed reports as DICOM SR (issue 14, item 4), end to end on real files: phantom
 * CT series (one classic, retagged with a Latin-1 patient name; one Enhanced CT multi-frame) are
 * imported and analysed by the bundled ONNX model, a radiologist reviews the findings and signs a
 * report, and the SRs mia writes are checked by the tools a PACS site trusts: dicom3tools'
 * dciodvfy (no errors), dcmtk's dsrdump (reads them, shows codes, confidences and SCOORD) and
 * pydicom (the content tree holds what the API says: codes, confidences, boxes on the right image
 * and frame, verdicts, the algorithm). Writing twice gives the same bytes; a verdict or an
 * addendum gives a new instance.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '#server/cli/main.ts';
import { formatDecimal } from '#server/dicom/write/data-set-writer.ts';
import { insertQueuedAnalysis } from '#server/store/analysis-jobs.ts';
import { inTransaction } from '#server/store/database.ts';
import { enhancedCt, type EnhancedCt } from '../helpers/enhanced.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { seedAnalysis, type SeededScan } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { importFolder, phantomDicom, waitForJob, type TruthSeries } from '../analysis/analysis-helpers.ts';
import { python, SEED_TEST_BASE } from '../analysis/helpers.ts';

const run = promisify(execFile);
const SEED_CLASSIC = SEED_TEST_BASE + 6600;
const SEED_MULTIFRAME = SEED_TEST_BASE + 6610;
const CT_IMAGE_STORAGE = '1.2.840.10008.5.1.4.1.1.2';
const ENHANCED_CT_STORAGE = '1.2.840.10008.5.1.4.1.1.2.1';
const READER_NAME = 'Ørsted^Åse';

type Code = { value: string; scheme: string; meaning: string };
type Item = {
  relationship: string | null;
  type: string;
  name: Code;
  observed_at: string | null;
  text?: string;
  code?: Code;
  numeric?: string;
  float?: number;
  unit?: Code;
  uid?: string;
  person?: string;
  graphic_type?: string;
  graphic_data?: number[];
  ref?: { sop_class: string; sop_instance: string; frames: number[] | null };
  template?: string | null;
  children: Item[];
};
type Evidence = { study: string; series: string; sop_class: string; sop_instance: string };
type SrSummary = {
  transfer_syntax: string;
  media_sop_instance: string;
  sop_class: string;
  sop_instance: string;
  charset: string | null;
  patient_name: string;
  patient_id: string;
  study_uid: string;
  series_uid: string;
  modality: string;
  content_date: string;
  completion: string;
  verification: string;
  verifying: { name: string; at: string }[];
  evidence: Evidence[];
  other_evidence: Evidence[];
  tree: Item;
};

let t: TestServer;
let dir: string;
let classic: TruthSeries;
let multiframe: EnhancedCt;
let studyUid: string;
let reader: { key: string; userId: string };
const analyses = new Map<string, string>();

async function sr(path: string, key = t.adminKey): Promise<{ status: number; bytes: Buffer; headers: Headers; json: any }> {
  const res = await fetch(t.url + path, { headers: { Authorization: `Bearer ${key}` } });
  const bytes = Buffer.from(await res.arrayBuffer());
  const json = res.headers.get('content-type')?.startsWith('application/json') ? JSON.parse(bytes.toString('utf8')) : undefined;
  return { status: res.status, bytes, headers: res.headers, json };
}

let fileCount = 0;
function saved(bytes: Buffer): string {
  fileCount += 1;
  const path = join(dir, 'out', `sr-${fileCount}.dcm`);
  writeFileSync(path, bytes);
  return path;
}

/** dciodvfy's findings; it exits 1 when it reports errors, so the exit code alone is not read. */
async function dciodvfy(path: string): Promise<{ errors: string[]; warnings: string[]; iod: string }> {
  let output: string;
  try {
    const done = await run('dciodvfy', [path], { maxBuffer: 16 * 1024 * 1024 });
    output = done.stdout + done.stderr;
  } catch (error) {
    const e = error as NodeJS.ErrnoException & { stdout?: string; stderr?: string };
    if (e.code === 'ENOENT') throw new Error('dciodvfy not found: install Debian dicom3tools (apt-get install dicom3tools; scripts/system-deps.sh)');
    output = (e.stdout ?? '') + (e.stderr ?? '');
  }
  const lines = output.split('\n').map((l) => l.trim()).filter(Boolean);
  return { errors: lines.filter((l) => /^Error/.test(l)), warnings: lines.filter((l) => /^Warning/.test(l)), iod: lines[0] ?? '' };
}

async function dsrdump(path: string): Promise<string> {
  try {
    const done = await run('dsrdump', ['-Ec', '+Pl', '+Pu', path], { maxBuffer: 16 * 1024 * 1024 });
    // Debian's dcmtk 3.6.7 checks values only in the character sets it was built to convert; it
    // says so for UTF-8 and reads the document all the same. Any other remark is a finding.
    const remarks = done.stderr.split('\n').filter((l) => l.trim() !== '' && !/VR checker does not support this Specific Character Set: ISO_IR 192/.test(l));
    expect(remarks, 'dsrdump warnings').toEqual([]);
    return done.stdout;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new Error('dsrdump not found: install Debian dcmtk (apt-get install dcmtk)');
    throw error;
  }
}

async function pydicomRead(path: string): Promise<SrSummary> {
  return JSON.parse((await python([join(import.meta.dirname, '..', 'helpers', 'read_sr.py'), path])).stdout) as SrSummary;
}

function all(item: Item): Item[] {
  return [item, ...item.children.flatMap(all)];
}
const named = (items: readonly Item[], meaning: string): Item[] => items.filter((i) => i.name.meaning === meaning);
const one = (items: readonly Item[], meaning: string): Item => {
  const found = named(items, meaning);
  expect(found, meaning).toHaveLength(1);
  return found[0]!;
};

async function analyse(scanId: string): Promise<string> {
  const reply = await t.request('POST', `/v1/scans/${scanId}/analyses`, { body: {} });
  expect(reply.status, reply.text).toBe(202);
  const job = await waitForJob(t, reply.json.data.id, 120_000);
  expect(job.status, job.reason).toBe('succeeded');
  return job.id as string;
}

async function results(scanId: string): Promise<any[]> {
  const reply = await t.request('GET', `/v1/scans/${scanId}/results`, { headers: { 'API-Version': '1.1' } });
  expect(reply.status, reply.text).toBe(200);
  return reply.json.data.findings;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-sr-'));
  mkdirSync(join(dir, 'out'));
  [classic] = (await phantomDicom(dir, 'series/classic', { seed: SEED_CLASSIC, series: 1, modality: 'CT', kinds: 'tumor' })) as [TruthSeries];
  // A haemorrhage: the test is about the SR's frame reference, so it needs a lesion every model
  // version finds (2.0.0 scores this seed's small CT infarct 0.44, under its 0.5 threshold).
  const [source] = (await phantomDicom(dir, 'source', { seed: SEED_MULTIFRAME, series: 1, modality: 'CT', kinds: 'hemorrhage' })) as [TruthSeries];
  studyUid = `1.2.826.0.1.3680043.10.1000.${process.pid}.66`;
  // The phantoms are written in ISO_IR 100: a Latin-1 name the SR must carry as UTF-8.
  await python([
    join(import.meta.dirname, '..', 'helpers', 'retag_study.py'),
    join(dir, 'series', 'classic', `series-${SEED_CLASSIC}-CT`),
    JSON.stringify({ patient_id: 'SR-PAT-1', patient_name: 'MÜLLER^HANS', study_uid: studyUid, date: '20260301', description: 'CT head', accession: 'ACC-SR-1', number: 3 }),
  ]);
  mkdirSync(join(dir, 'series', 'enhanced'));
  multiframe = enhancedCt(join(dir, 'source', `series-${SEED_MULTIFRAME}-CT`), join(dir, 'series', 'enhanced', 'multiframe.dcm'));
  void source;
  t = await startTestServer();
  await importFolder(t, join(dir, 'series'));
  analyses.set(classic.scan_uid, await analyse(classic.scan_uid));
  analyses.set(multiframe.series_uid, await analyse(multiframe.series_uid));
  const issued = await t.keyFor('radiologist', { email: 'reader@hospital.test' });
  reader = { key: issued.key, userId: issued.userId };
  const named = await t.request('PATCH', `/v1/users/${reader.userId}`, { body: { name: READER_NAME } });
  expect(named.status, named.text).toBe(200);
}, 300_000);

afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('an analysis as a TID 1500 Measurement Report', () => {
  it('passes dciodvfy, reads in dsrdump and pydicom, and holds every finding as the API gives it', async () => {
    const modelFindings = await results(classic.scan_uid);
    expect(modelFindings.length, 'the model found nothing on the tumour phantom').toBeGreaterThanOrEqual(1);
    // A finding the model missed, drawn by the reader: in the SR with the reader as its observer.
    const drawn = await t.request('POST', `/v1/scans/${classic.scan_uid}/findings`, {
      key: reader.key,
      body: { source: 'reader', label: 'hemorrhage_detected', instance_uid: modelFindings[0].instance_uid, location: { x: 5.5, y: 6.25, width: 10, height: 12 } },
    });
    expect(drawn.status, drawn.text).toBe(201);
    const findings = await results(classic.scan_uid);
    // The reader accepts the model's most confident finding and rejects its next one, with a
    // reason (how many findings the model gives on this phantom depends on the model version).
    const byModel = findings.filter((f: any) => f.source === 'model');
    const verdicts = new Map<string, { review: string; reason?: string }>([[byModel[0].id, { review: 'accepted' }]]);
    if (byModel[1]) verdicts.set(byModel[1].id, { review: 'rejected', reason: 'Partial volume\tartefact' });
    for (const [id, v] of verdicts) {
      const reply = await t.request('PATCH', `/v1/findings/${id}`, { key: reader.key, body: v });
      expect(reply.status, reply.text).toBe(200);
    }
    const analysisId = analyses.get(classic.scan_uid)!;
    const job = (await t.request('GET', `/v1/analyses/${analysisId}`)).json.data;
    const glossary = new Map<string, any>((await t.request('GET', '/v1/labels')).json.data.items.map((l: any) => [l.label, l]));
    const reply = await sr(`/v1/analyses/${analysisId}/sr`);
    expect(reply.status, reply.bytes.toString('utf8').slice(0, 300)).toBe(200);
    expect(reply.headers.get('content-type')).toBe('application/dicom');
    const path = saved(reply.bytes);

    const verified = await dciodvfy(path);
    console.info(`dciodvfy on the AI result SR (${verified.iod}): ${verified.errors.length} errors; warnings: ${[...new Set(verified.warnings)].join(' | ') || 'none'}`);
    expect(verified.iod).toBe('ComprehensiveSR');
    expect(verified.errors).toEqual([]);

    const dump = await dsrdump(path);
    expect(dump).toContain('Comprehensive SR Document');
    expect(dump).toContain('SCOORD');
    for (const f of findings) {
      expect(dump).toContain(glossary.get(f.label).code.value);
      if (f.source === 'model') expect(dump).toContain(`"${formatDecimal(f.confidence)}"`);
    }

    const doc = await pydicomRead(path);
    expect(doc).toMatchObject({
      transfer_syntax: '1.2.840.10008.1.2.1',
      sop_class: '1.2.840.10008.5.1.4.1.1.88.33',
      media_sop_instance: doc.sop_instance,
      charset: 'ISO_IR 192',
      patient_name: 'MÜLLER^HANS',
      patient_id: 'SR-PAT-1',
      study_uid: studyUid,
      modality: 'SR',
      content_date: job.finished_at.slice(0, 10).replace(/-/g, ''),
      completion: 'COMPLETE',
      verification: 'UNVERIFIED',
    });
    expect(doc.sop_instance).toBe(reply.headers.get('x-sop-instance-uid'));
    expect(doc.series_uid).not.toBe(classic.scan_uid);
    // The evidence is the series the model read, every slice of it.
    expect(doc.evidence.map((e) => e.sop_instance).sort()).toHaveLength(classic.slices);
    expect(new Set(doc.evidence.map((e) => e.series))).toEqual(new Set([classic.scan_uid]));

    const root = doc.tree;
    expect(root).toMatchObject({ type: 'CONTAINER', template: '1500', name: { value: '126000', scheme: 'DCM', meaning: 'Imaging Measurement Report' } });
    const top = root.children;
    expect(one(top, 'Observer Type').code).toMatchObject({ value: '121007', scheme: 'DCM' });
    expect(one(top, 'Device Observer Name').text).toBe(job.model.name);
    expect(one(top, 'Procedure reported').code?.value).toBe('25045-6');
    const library = all(one(top, 'Image Library')).filter((i) => i.type === 'IMAGE');
    expect(library.map((i) => i.ref?.sop_instance).sort()).toEqual([...new Set(findings.map((f) => f.instance_uid))].sort());

    const groups = named(one(top, 'Imaging Measurements').children, 'Measurement Group');
    expect(groups).toHaveLength(findings.length);
    for (const f of findings) {
      const group = groups.find((g) => g.children.some((c) => c.name.meaning === 'Tracking Identifier' && c.text === `finding ${f.id}`));
      expect(group, `group of finding ${f.id}`).toBeDefined();
      const items = group!.children;
      const label = glossary.get(f.label);
      expect(one(items, 'Finding').code).toEqual({ value: label.code.value, scheme: 'SCT', meaning: label.code.meaning });
      expect(one(items, 'Tracking Unique Identifier').uid).toMatch(/^2\.25\.\d+$/);
      if (f.source === 'reader') {
        // The reader's own finding: observed by them, no algorithm and no model certainty.
        expect(one(items, 'Person Observer Name').person).toBe(READER_NAME);
        expect(named(items, 'Algorithm Name')).toEqual([]);
        expect(named(items, 'Certainty of Finding')).toEqual([]);
      } else {
        expect(one(items, 'Algorithm Name').text).toBe(job.model.name);
        expect(one(items, 'Algorithm Version').text).toBe(job.model.version);
        expect(named(items, 'Algorithm Parameters').map((p) => p.text)).toContain(`model_sha256=${job.model.sha256}`);
        const certainty = one(items, 'Certainty of Finding');
        expect(certainty.float).toBe(f.confidence);
        expect(certainty.unit).toEqual({ value: '1', scheme: 'UCUM', meaning: 'no units' });
      }
      const region = one(items, 'Image Region');
      expect(region.graphic_type).toBe('POLYLINE');
      const { x, y, width, height } = f.location;
      const corners = [x, y, x + width, y, x + width, y + height, x, y + height, x, y];
      // Graphic Data is FL (float32): the box within its precision.
      region.graphic_data!.forEach((v, i) => expect(v).toBeCloseTo(corners[i]!, 3));
      expect(region.children).toEqual([expect.objectContaining({ relationship: 'SELECTED FROM', type: 'IMAGE', ref: { sop_class: CT_IMAGE_STORAGE, sop_instance: f.instance_uid, frames: null } })]);
      const verdict = f.source === 'reader' ? { review: 'accepted' } : verdicts.get(f.id);
      const reviews = named(items, 'Reader review of finding');
      if (!verdict) {
        expect(reviews).toEqual([]);
        continue;
      }
      const review = one(items, 'Reader review of finding');
      expect(review.code).toMatchObject({ value: verdict.review.toUpperCase(), scheme: '99MIA' });
      expect(review.observed_at).toMatch(/^\d{14}\.\d{6}$/);
      expect(one(review.children, 'Person Observer Name').person).toBe(READER_NAME);
      expect(one(review.children, "Person Observer's Login Name").text).toBe('reader@hospital.test');
      if (verdict.reason) expect(one(review.children, 'Comment').text).toBe('Partial volume artefact');
    }
  });

  it('references the frame of a multi-frame image a finding is on', async () => {
    const findings = await results(multiframe.series_uid);
    expect(findings.length, 'the model found nothing on the haemorrhage phantom').toBeGreaterThanOrEqual(1);
    const reply = await sr(`/v1/analyses/${analyses.get(multiframe.series_uid)}/sr`);
    expect(reply.status).toBe(200);
    const path = saved(reply.bytes);
    expect((await dciodvfy(path)).errors).toEqual([]);
    await dsrdump(path);
    const doc = await pydicomRead(path);
    const regions = all(doc.tree).filter((i) => i.type === 'SCOORD');
    expect(regions).toHaveLength(findings.length);
    const selected = regions.map((r) => r.children[0]!.ref);
    expect(selected.map((s) => s!.frames![0]).sort()).toEqual(findings.map((f) => f.frame + 1).sort());
    for (const s of selected) expect(s).toMatchObject({ sop_class: ENHANCED_CT_STORAGE, sop_instance: multiframe.instance_uid });
    expect(doc.evidence).toEqual([{ study: expect.any(String), series: multiframe.series_uid, sop_class: ENHANCED_CT_STORAGE, sop_instance: multiframe.instance_uid }]);
  });

  it('writes the same bytes every time, over HTTP and from the CLI, and a new instance after a verdict', async () => {
    const analysisId = analyses.get(multiframe.series_uid)!;
    const first = await sr(`/v1/analyses/${analysisId}/sr`);
    const second = await sr(`/v1/analyses/${analysisId}/sr`);
    expect(Buffer.compare(first.bytes, second.bytes)).toBe(0);
    const out = join(dir, 'out', 'cli.dcm');
    const lines: string[] = [];
    const code = await main(['sr', 'analysis', analysisId, '--out', out, '--data', t.dataDir], { out: (l) => lines.push(l), err: (l) => lines.push(l) });
    expect(code, lines.join('\n')).toBe(0);
    expect(Buffer.compare(readFileSync(out), first.bytes)).toBe(0);

    const [finding] = await results(multiframe.series_uid);
    const reviewed = await t.request('PATCH', `/v1/findings/${finding.id}`, { key: reader.key, body: { review: 'accepted' } });
    expect(reviewed.status, reviewed.text).toBe(200);
    const after = await pydicomRead(saved((await sr(`/v1/analyses/${analysisId}/sr`)).bytes));
    const before = await pydicomRead(saved(first.bytes));
    expect(after.sop_instance).not.toBe(before.sop_instance);
    expect(after.series_uid).toBe(before.series_uid);
    expect(after.study_uid).toBe(before.study_uid);
  });

  it('writes an analysis that found nothing as a report of its evidence alone', async () => {
    const imported = await seedImportedInstance(t);
    const db = t.server.services.db;
    const scan = (await db.get(`SELECT s.id AS "scanRef", s.scan_id AS "scanId", p.patient_id AS "patientId", st.study_uid AS "studyUid"
      FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?`, [imported.scanId])) as SeededScan;
    await seedAnalysis(db, scan, []);
    const analysisId = ((await db.get('SELECT public_id FROM analyses WHERE scan_ref = ?', [scan.scanRef])) as { public_id: string }).public_id;
    const reply = await sr(`/v1/analyses/${analysisId}/sr`);
    expect(reply.status).toBe(200);
    const path = saved(reply.bytes);
    expect((await dciodvfy(path)).errors).toEqual([]);
    await dsrdump(path);
    const doc = await pydicomRead(path);
    expect(named(doc.tree.children, 'Imaging Measurements')).toEqual([]);
    expect(named(doc.tree.children, 'Image Library')).toEqual([]);
    expect(doc.evidence.map((e) => e.sop_instance)).toEqual([imported.instanceUid]);
    // CT_small's own patient, as its file holds it; all ASCII, so no character set is named.
    expect(doc).toMatchObject({ patient_name: 'CompressedSamples^CT1', patient_id: '1CT1', charset: null });
  });

  it('is 409 for an analysis without a result and 404 for an unknown one', async () => {
    const db = t.server.services.db;
    const scan = (await db.get('SELECT id FROM scans WHERE scan_id = ?', [multiframe.series_uid])) as { id: number };
    // Failed in the transaction that queues it, so the runner never claims it.
    const queued = await inTransaction(db, async (tx) => {
      const row = await insertQueuedAnalysis(tx, {
        scanRef: scan.id,
        model: { id: 'mia-phantom-detector', name: 'mia phantom detector', version: '1.0.0', sha256: 'ab'.repeat(32) },
        decision: { operatingPoint: null, thresholds: {} },
        triageLabels: {},
        requestedBy: null,
        at: t.clock.now().toISOString(),
      });
      await tx.run("UPDATE analyses SET status = 'failed', error = 'test' WHERE id = ?", [row.id]);
      return row;
    });
    const conflict = await sr(`/v1/analyses/${queued.public_id}/sr`);
    expect(conflict.status).toBe(409);
    expect(conflict.json.error.message).toMatch(/no result/);
    expect((await sr('/v1/analyses/ana_unknown/sr')).status).toBe(404);
  });
});

describe('a signed report as a Basic Text SR', () => {
  it('references the images and the AI result SR, is VERIFIED by its signer, and takes its addenda as new instances', async () => {
    const draft = await t.request('POST', '/v1/reports', { key: reader.key, body: { scan_id: classic.scan_uid, impression: 'Enhancing mass, right frontal lobe.\nNo midline shift.' } });
    expect(draft.status, draft.text).toBe(201);
    const reportId = draft.json.data.id as string;
    expect((await sr(`/v1/reports/${reportId}/sr`, reader.key)).status).toBe(409);
    const signed = await t.request('PATCH', `/v1/reports/${reportId}`, { key: reader.key, body: { status: 'final' } });
    expect(signed.status, signed.text).toBe(200);

    const aiSr = await sr(`/v1/analyses/${analyses.get(classic.scan_uid)}/sr`);
    const reply = await sr(`/v1/reports/${reportId}/sr`, reader.key);
    expect(reply.status).toBe(200);
    const path = saved(reply.bytes);
    const verified = await dciodvfy(path);
    console.info(`dciodvfy on the report SR (${verified.iod}): ${verified.errors.length} errors; warnings: ${[...new Set(verified.warnings)].join(' | ') || 'none'}`);
    expect(verified.iod).toBe('BasicTextSR');
    expect(verified.errors).toEqual([]);
    const dump = await dsrdump(path);
    expect(dump).toContain('Enhancing mass, right frontal lobe.');
    const doc = await pydicomRead(path);
    expect(doc).toMatchObject({
      sop_class: '1.2.840.10008.5.1.4.1.1.88.11',
      completion: 'COMPLETE',
      verification: 'VERIFIED',
      patient_name: 'MÜLLER^HANS',
      study_uid: studyUid,
      verifying: [{ name: READER_NAME, at: expect.stringMatching(/^\d{14}\.\d{6}$/) }],
    });
    expect(doc.evidence).toHaveLength(classic.slices);
    const aiUid = aiSr.headers.get('x-sop-instance-uid');
    expect(doc.other_evidence.map((e) => e.sop_instance)).toEqual([aiUid]);
    const items = all(doc.tree);
    expect(doc.tree).toMatchObject({ template: '2000', name: { value: '18748-4', scheme: 'LN' } });
    expect(items.find((i) => i.type === 'COMPOSITE')?.ref).toEqual({ sop_class: '1.2.840.10008.5.1.4.1.1.88.33', sop_instance: aiUid, frames: null });
    expect(one(items, 'Impression').text).toBe('Enhancing mass, right frontal lobe.\r\nNo midline shift.');
    const lines = named(one(items, 'Findings').children, 'Finding');
    expect(lines.length).toBe(signed.json.data.findings.length);
    expect(lines[0]!.text).toMatch(/accepted; confidence \d\.\d\d/);
    expect(lines[0]!.children[0]).toMatchObject({ relationship: 'INFERRED FROM', type: 'IMAGE' });
    const again = await sr(`/v1/reports/${reportId}/sr`, reader.key);
    expect(Buffer.compare(again.bytes, reply.bytes)).toBe(0);

    // An addendum that changes a verdict: a new report instance, referencing the new AI result.
    const finding = signed.json.data.findings[0];
    const addendum = await t.request('POST', `/v1/reports/${reportId}/addenda`, { key: reader.key, body: { text: 'On review the mass is an artefact.', findings: [{ id: finding.id, review: 'rejected' }] } });
    expect(addendum.status, addendum.text).toBe(201);
    const amended = await sr(`/v1/reports/${reportId}/sr`, reader.key);
    const amendedPath = saved(amended.bytes);
    expect((await dciodvfy(amendedPath)).errors).toEqual([]);
    await dsrdump(amendedPath);
    const next = await pydicomRead(amendedPath);
    expect(next.sop_instance).not.toBe(doc.sop_instance);
    expect(next.series_uid).toBe(doc.series_uid);
    expect(next.verifying.map((v) => v.name)).toEqual([READER_NAME, READER_NAME]);
    const newAi = (await sr(`/v1/analyses/${analyses.get(classic.scan_uid)}/sr`)).headers.get('x-sop-instance-uid');
    expect(newAi).not.toBe(aiUid);
    expect(next.other_evidence.map((e) => e.sop_instance)).toEqual([newAi]);
    const section = one(all(next.tree), 'Addendum');
    expect(section.type).toBe('CONTAINER');
    expect(section.observed_at).toMatch(/^\d{14}\.\d{6}$/);
    expect(section.children.map((c) => c.text ?? c.person ?? c.code?.meaning)).toEqual(
      expect.arrayContaining(['On review the mass is an artefact.', READER_NAME, expect.stringMatching(new RegExp(`finding ${finding.id}: accepted -> rejected$`))]),
    );
    // The signed findings stay as signed: the verdict change lives in the addendum.
    expect(named(one(all(next.tree), 'Findings').children, 'Finding')[0]!.text).toMatch(/accepted/);

    const out = join(dir, 'out', 'report-cli.dcm');
    expect(await main(['sr', 'report', reportId, '--out', out, '--data', t.dataDir], { out: () => {}, err: () => {} })).toBe(0);
    expect(Buffer.compare(readFileSync(out), amended.bytes)).toBe(0);
  });
});
