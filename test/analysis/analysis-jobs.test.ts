/**
 * Analysis jobs on the real server: scans the model does not apply to are recorded as such (not
 * failed), a corrupt stored file fails its job with the reason while the server keeps serving,
 * cancel, requeue through the scan status, and the model registry (a dropped-in folder with a
 * broken manifest or a tampered file is listed as invalid, naming the field).
 */
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PYDICOM_CORPUS, seedImportedInstance } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { MODEL_DIR, SEED_TEST_BASE } from './helpers.ts';
import { importFolder, phantomDicom, waitForJob, type TruthSeries } from './analysis-helpers.ts';

let t: TestServer;
let dir: string;
let small: TruthSeries[];
let long: TruthSeries[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-analysis-jobs-'));
  [small, long] = await Promise.all([
    phantomDicom(dir, 'series/small', { seed: SEED_TEST_BASE + 6300, series: 3, modality: 'CT', slices: 6, size: 96 }),
    phantomDicom(dir, 'series/long', { seed: SEED_TEST_BASE + 6310, series: 1, modality: 'MR', slices: 120 }),
  ]);
  // Small batches make a long series take many steps, so a cancel lands mid-run.
  t = await startTestServer({ analysisBatchSize: 4 });
  await importFolder(t, join(dir, 'series'));
}, 120_000);

afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function analyse(scanId: string, body: Record<string, unknown> = {}): Promise<any> {
  const reply = await t.request('POST', `/v1/scans/${scanId}/analyses`, { body });
  expect(reply.status, reply.text).toBe(202);
  return waitForJob(t, reply.json.data.id);
}

describe('scans the model does not apply to', () => {
  it.each([
    ['a single-slice CT', 'CT_small.dcm', /1 slice\(s\).*at least 3/],
    ['an RT dose grid (unsupported modality)', 'rtdose.dcm', /modality RTDOSE/],
    ['a colour secondary capture', 'SC_rgb_rle.dcm', /modality OT/],
  ])('records %s as not_applicable with the reason; the scan returns to received', async (_name, file, reason) => {
    const { scanId } = await seedImportedInstance(t, join(PYDICOM_CORPUS, file));
    const job = await analyse(scanId);
    expect(job.status).toBe('not_applicable');
    expect(job.reason).toMatch(reason);
    const scan = (await t.request('GET', `/v1/scans/${scanId}`)).json.data;
    expect(scan.status).toBe('received');
    expect(scan.status_reason).toMatch(reason);
    expect((await t.request('GET', `/v1/scans/${scanId}/results`)).status).toBe(404);
  });
});

describe('failures', () => {
  it('a corrupt stored file fails the job with the reason; the server keeps serving', async () => {
    const scanId = small[0]!.scan_uid;
    const instances = (await t.request('GET', `/v1/scans/${scanId}/instances`)).json.data.items;
    const victim = instances[2].instance_uid as string;
    const row = (await t.server.services.db.get('SELECT file_path FROM instances WHERE sop_instance_uid = ?', [victim])) as { file_path: string };
    const path = join(t.dataDir, row.file_path);
    const original = readFileSync(path);
    truncateSync(path, Math.floor(original.length / 2));
    try {
      const job = await analyse(scanId);
      expect(job.status).toBe('failed');
      expect(job.reason).toContain(victim);
      const scan = (await t.request('GET', `/v1/scans/${scanId}`)).json.data;
      expect(scan).toMatchObject({ status: 'failed', status_reason: job.reason });
      expect((await t.request('GET', '/v1/auth/me')).status).toBe(200);
    } finally {
      writeFileSync(path, original);
    }
    // Repaired: a client requeues the failed scan by setting its status, and it is analysed.
    const requeued = await t.request('POST', `/v1/scans/${scanId}`, { body: { status: 'queued' } });
    expect(requeued.json.data.status).toBe('queued');
    const jobs = (await t.server.services.db.all(`SELECT public_id FROM analyses a JOIN scans s ON s.id = a.scan_ref WHERE s.scan_id = ? ORDER BY a.id`, [scanId])) as Array<{ public_id: string }>;
    expect((await waitForJob(t, jobs.at(-1)!.public_id)).status).toBe('succeeded');
    expect((await t.request('GET', `/v1/scans/${scanId}`)).json.data.status).toBe('analyzed');
  });

  it('a stored file gone from the archive fails the job naming the instance; restored, the scan analyses', async () => {
    const scanId = small[2]!.scan_uid;
    const instances = (await t.request('GET', `/v1/scans/${scanId}/instances`)).json.data.items;
    const victim = instances[4].instance_uid as string;
    const row = (await t.server.services.db.get('SELECT file_path FROM instances WHERE sop_instance_uid = ?', [victim])) as { file_path: string };
    const path = join(t.dataDir, row.file_path);
    const original = readFileSync(path);
    rmSync(path);
    try {
      const job = await analyse(scanId);
      expect(job.status).toBe('failed');
      expect(job.reason).toContain(`instance ${victim}: stored file unreadable`);
      expect(job.reason).toContain('ENOENT');
    } finally {
      writeFileSync(path, original);
    }
    const again = await analyse(scanId);
    expect(again.status).toBe('succeeded');
  });

  it('404 for an unknown scan, job or model', async () => {
    expect((await t.request('POST', '/v1/scans/1.2.3.4.5/analyses', { body: {} })).status).toBe(404);
    expect((await t.request('GET', '/v1/analyses/ana_000000000000000000000000')).status).toBe(404);
    expect((await t.request('POST', `/v1/scans/${small[1]!.scan_uid}/analyses`, { body: { model_id: 'no-such-model' } })).status).toBe(404);
  });
});

describe('cancel', () => {
  it('cancels a running job: no result is stored and the scan returns to received', async () => {
    const scanId = long[0]!.scan_uid;
    const started = await t.request('POST', `/v1/scans/${scanId}/analyses`, { body: {} });
    expect(started.status).toBe(202);
    const again = await t.request('POST', `/v1/scans/${scanId}/analyses`, { body: {} });
    expect(again.status).toBe(409);
    expect(again.json.error.details).toContain(started.json.data.id);
    const cancelled = await t.request('DELETE', `/v1/analyses/${started.json.data.id}`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.json.data.status).toBe('cancelled');
    // The runner stops at its next batch and must not overwrite the cancel.
    await new Promise((r) => setTimeout(r, 500));
    const job = (await t.request('GET', `/v1/analyses/${started.json.data.id}`)).json.data;
    expect(job.status).toBe('cancelled');
    expect(job.progress.slices_done).toBeLessThan(120);
    const scan = (await t.request('GET', `/v1/scans/${scanId}`)).json.data;
    expect(scan).toMatchObject({ status: 'received', status_reason: 'analysis cancelled' });
    expect((await t.request('GET', `/v1/scans/${scanId}/results`)).status).toBe(404);
    // Cancelling a finished job changes nothing.
    expect((await t.request('DELETE', `/v1/analyses/${started.json.data.id}`)).json.data.status).toBe('cancelled');
  });
});

describe('model registry', () => {
  const userModels = (): string => join(t.dataDir, 'models');

  function dropModel(id: string, edit: (manifest: any) => void = () => undefined, tamper = false): void {
    const target = join(userModels(), id);
    mkdirSync(target, { recursive: true });
    cpSync(join(MODEL_DIR, 'model.onnx'), join(target, 'model.onnx'));
    const manifest = JSON.parse(readFileSync(join(MODEL_DIR, 'manifest.json'), 'utf8'));
    manifest.id = id;
    edit(manifest);
    writeFileSync(join(target, 'manifest.json'), JSON.stringify(manifest, null, 2));
    if (tamper) {
      const bytes = readFileSync(join(target, 'model.onnx'));
      bytes[bytes.length - 1] = (bytes[bytes.length - 1]! + 1) % 256;
      writeFileSync(join(target, 'model.onnx'), bytes);
    }
  }

  it('lists dropped-in folders: a broken manifest and a hash mismatch are invalid, naming the field', async () => {
    dropModel('broken-threshold', (m) => {
      m.labels[0].threshold = 1.5;
    });
    dropModel('tampered-file', () => undefined, true);
    mkdirSync(join(userModels(), 'no-manifest'), { recursive: true });
    dropModel('phantom-copy', (m) => {
      m.name = 'phantom copy';
    });
    const items = (await t.request('GET', '/v1/models')).json.data.items as any[];
    const byId = new Map(items.map((m) => [m.id, m]));
    expect(byId.get('broken-threshold')).toMatchObject({ status: 'invalid', source: 'user', selected: false });
    expect(byId.get('broken-threshold').error).toMatch(/^labels\[0\]\.threshold: expected number between 0 and 1/);
    expect(byId.get('tampered-file')).toMatchObject({ status: 'invalid' });
    expect(byId.get('tampered-file').error).toMatch(/^file\.sha256: does not match model\.onnx/);
    expect(byId.get('no-manifest').error).toMatch(/manifest\.json/);
    expect(byId.get('phantom-copy')).toMatchObject({ status: 'ready', source: 'user', name: 'phantom copy', selected: false });
    expect(byId.get('mia-phantom-detector')).toMatchObject({ status: 'ready', selected: true });
  });

  it('an admin selects a valid model; analyses then use it; invalid ones are refused', async () => {
    const refused = await t.request('POST', '/v1/models/tampered-file/select');
    expect(refused.status).toBe(409);
    expect(refused.json.error.details).toMatch(/file\.sha256/);
    expect((await t.request('POST', `/v1/scans/${small[2]!.scan_uid}/analyses`, { body: { model_id: 'broken-threshold' } })).status).toBe(409);
    const selected = await t.request('POST', '/v1/models/phantom-copy/select');
    expect(selected.status).toBe(200);
    expect(selected.json.data).toMatchObject({ id: 'phantom-copy', selected: true });
    try {
      const job = await analyse(small[2]!.scan_uid);
      expect(job).toMatchObject({ status: 'succeeded', model: { id: 'phantom-copy', name: 'phantom copy' } });
      const result = await t.request('GET', `/v1/scans/${small[2]!.scan_uid}/results`, { headers: { 'API-Version': '1.1' } });
      expect(result.json.data.analysis.model.id).toBe('phantom-copy');
    } finally {
      await t.request('POST', '/v1/models/mia-phantom-detector/select');
    }
  });
});
