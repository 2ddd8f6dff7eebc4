/**
 * Bring your own model, end to end on the real server: the example models in example-models/
 * (a YOLO-style detector and a slice classifier, NOT FOR CLINICAL USE) copied into the data
 * folder's models/, selected, and run over phantom DICOM series: findings with the right
 * localization, a report, and CSV/XML/JSON exports that say what the location means.
 */
import { execFile } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { XMLValidator } from 'fast-xml-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseCsv } from '../helpers/csv.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { REPO_ROOT, SEED_TEST_BASE } from './helpers.ts';
import { importFolder, phantomDicom, waitForJob, type ResultFinding, type TruthSeries } from './analysis-helpers.ts';
import { iou } from '#server/analysis/nms.ts';

const run = promisify(execFile);
const EXAMPLES = join(REPO_ROOT, 'example-models');
/** Held-out seeds of phantoms.py's test range, apart from those other suites use. */
const SEED_LESION = SEED_TEST_BASE + 7300;
const SEED_CLEAN = SEED_TEST_BASE + 7400;

let t: TestServer;
let dir: string;
let lesion: TruthSeries[];
let clean: TruthSeries[];

type Result = { scan_id: string; findings: (ResultFinding & { localization?: string; id: string })[] };

async function analyseAll(model: string): Promise<Map<string, Result['findings']>> {
  const selected = await t.request('POST', `/v1/models/${model}/select`, { body: {} });
  expect(selected.status, selected.text).toBeLessThan(300);
  for (const s of [...lesion, ...clean]) {
    const reply = await t.request('POST', `/v1/scans/${s.scan_uid}/analyses`, { body: {} });
    expect(reply.status, reply.text).toBe(202);
    expect(reply.json.data.model.id).toBe(model);
    const job = await waitForJob(t, reply.json.data.id);
    expect(job.status, job.reason).toBe('succeeded');
  }
  const page = await t.request('GET', '/v1/scan/results?limit=500', { headers: { 'API-Version': '1.1' } });
  return new Map((page.json.data.items as Result[]).map((r) => [r.scan_id, r.findings]));
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-byom-e2e-'));
  [lesion, clean] = await Promise.all([
    phantomDicom(dir, 'series/lesion', { seed: SEED_LESION, series: 4, kinds: 'tumor', size: 128 }),
    phantomDicom(dir, 'series/clean', { seed: SEED_CLEAN, series: 2, kinds: 'none', size: 128 }),
  ]);
  t = await startTestServer();
  for (const id of ['mia-example-yolo', 'mia-example-classifier']) cpSync(join(EXAMPLES, id), join(t.dataDir, 'models', id), { recursive: true });
  await importFolder(t, join(dir, 'series'));
}, 120_000);

afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('example models from the data folder', () => {
  it('lists both as ready user models, not for clinical use', async () => {
    const items = (await t.request('GET', '/v1/models')).json.data.items as { id: string; status: string; source: string; not_for_clinical_use: boolean; error: string | null }[];
    for (const id of ['mia-example-yolo', 'mia-example-classifier']) {
      expect(items.find((m) => m.id === id)).toMatchObject({ status: 'ready', source: 'user', not_for_clinical_use: true, error: null });
    }
  });

  it('the YOLO-style detector boxes the planted lesions (localization box)', async () => {
    const results = await analyseAll('mia-example-yolo');
    let found = 0;
    for (const s of lesion) {
      const findings = results.get(s.scan_uid) ?? [];
      for (const f of findings) expect(f.localization).toBe('box');
      const l = s.lesions[0]!;
      // A toy trained for two minutes: the box must overlap the lesion on one of its slices.
      if (findings.some((f) => l.slices.some((sl) => sl.instance_uid === f.instance_uid && iou(f.location, sl.box) >= 0.3))) found += 1;
    }
    expect(found).toBeGreaterThanOrEqual(3);
  });

  it('the classifier reports image-level findings on the whole key image, and a report and every export say so', async () => {
    const results = await analyseAll('mia-example-classifier');
    let flagged = 0;
    for (const s of lesion) {
      const findings = results.get(s.scan_uid) ?? [];
      expect(findings.length).toBeLessThanOrEqual(1);
      const f = findings[0];
      if (!f) continue;
      flagged += 1;
      expect(f.localization).toBe('image');
      expect(f.label).toBe('lesion_present');
      // The whole key image: the phantoms are 128 x 128.
      expect(f.location).toEqual({ x: 0, y: 0, width: 128, height: 128 });
      // The key slice is one the lesion is on (argmax of the per-slice scores).
      expect(s.lesions[0]!.slices.map((sl) => sl.instance_uid)).toContain(f.instance_uid);
    }
    expect(flagged).toBeGreaterThanOrEqual(3);
    // Exports hold every scan's findings, a lesion-free series' false alarm too.
    const total = [...results.values()].reduce((n, f) => n + f.length, 0);

    const s = lesion.find((x) => (results.get(x.scan_uid) ?? []).length > 0)!;
    const report = await t.request('POST', '/v1/reports', { body: { scan_id: s.scan_uid } });
    expect(report.status, report.text).toBe(201);
    expect(report.json.data.findings[0]).toMatchObject({ localization: 'image', place: { width_mm: null, height_mm: null } });
    // No lesion with the image's width as its diameter.
    expect(report.json.data.lesions).toEqual([]);

    const engineer = await t.keyFor('data_engineer');
    const exported = async (format: string): Promise<string> => {
      const created = await t.request('POST', '/v1/exports', { key: engineer.key, body: { format } });
      expect(created.status, created.text).toBe(201);
      return (await t.request('GET', created.json.data.download_url, { key: engineer.key })).text;
    };
    const csv = (await exported('csv')).split('\r\n').filter((l) => l !== '');
    const header = csv[0]!.split(',');
    const col = header.indexOf('localization');
    // Appended after the earlier columns, in the order they came.
    expect(header.slice(col)).toEqual(['localization', 'mask_area_px', 'threshold', 'operating_point']);
    const rows = parseCsv(csv.join('\r\n')).slice(1).filter((r) => r.includes('lesion_present'));
    expect(rows.length).toBe(total);
    for (const row of rows) expect(row[col]).toBe('image');
    const json = JSON.parse(await exported('json')) as { scan_results: Result[] };
    const jsonFindings = json.scan_results.flatMap((r) => r.findings);
    expect(jsonFindings.length).toBe(total);
    for (const f of jsonFindings) expect(f.localization).toBe('image');
    const xml = await exported('xml');
    expect(XMLValidator.validate(xml)).toBe(true);
    expect(xml.match(/<localization>image<\/localization>/g)?.length).toBe(total);

    // The DICOM SR names the image the finding is about and outlines nothing (TID 1501, no SCOORD).
    const analysisId = (await t.request('GET', `/v1/scans/${s.scan_uid}/results`, { headers: { 'API-Version': '1.1' } })).json.data.analysis.id as string;
    const res = await fetch(`${t.url}/v1/analyses/${analysisId}/sr`, { headers: { Authorization: `Bearer ${t.adminKey}` } });
    expect(res.status).toBe(200);
    const path = join(dir, 'classifier-sr.dcm');
    writeFileSync(path, Buffer.from(await res.arrayBuffer()));
    const dump = (await run('dsrdump', ['-Ec', path], { maxBuffer: 16 * 1024 * 1024 })).stdout;
    expect(dump).not.toContain('SCOORD');
    expect(dump).toMatch(/<contains IMAGE:\(,,"Source"\)=\(CT image,\)>\s*<contains NUM:\(,,"Certainty of Finding"\)/);
    const verify = await run('dciodvfy', [path], { maxBuffer: 16 * 1024 * 1024 }).catch((e: { stdout?: string; stderr?: string }) => ({ stdout: e.stdout ?? '', stderr: e.stderr ?? '' }));
    expect(`${verify.stdout}${verify.stderr}`.split('\n').filter((l) => /^Error/.test(l.trim()))).toEqual([]);
  });

  it('a detector whose manifest declares more classes than its tensor has fails the job, naming the field', async () => {
    const dir2 = join(t.dataDir, 'models', 'mia-example-yolo-misdeclared');
    cpSync(join(EXAMPLES, 'mia-example-yolo'), dir2, { recursive: true });
    const manifest = JSON.parse(readFileSync(join(dir2, 'manifest.json'), 'utf8')) as { id: string; output: { channels: string[] }; labels: { label: string }[] };
    manifest.id = 'mia-example-yolo-misdeclared';
    manifest.output.channels.push('other_detected');
    manifest.labels.push({ ...manifest.labels[0]!, label: 'other_detected' });
    writeFileSync(join(dir2, 'manifest.json'), JSON.stringify(manifest));
    expect((await t.request('POST', '/v1/models/mia-example-yolo-misdeclared/select', { body: {} })).status).toBeLessThan(300);
    const reply = await t.request('POST', `/v1/scans/${lesion[0]!.scan_uid}/analyses`, { body: {} });
    const job = await waitForJob(t, reply.json.data.id);
    expect(job.status).toBe('failed');
    expect(job.reason).toMatch(/output boxes: output\.layout boxes_last expects 7 values per box on axis 2 \(4 box \+ objectness \+ 2 channels\), got \[2, 64, 6\]/);
  });
});
