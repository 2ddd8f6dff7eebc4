/**
 * A site's operating point, over HTTP on the real server with the real model: an admin picks one
 * of a model's named points on GET /v1/models' list, and the next analysis runs at its thresholds
 * (on the calibrated scale) and says so on every finding it makes.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installOperatingPointModel, OP_MODEL_ID, OP_POINTS } from '../helpers/operating-point-model.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { SEED_TEST_BASE } from './helpers.ts';
import { importFolder, phantomDicom, waitForJob, type TruthSeries } from './analysis-helpers.ts';

let t: TestServer;
let dir: string;
let series: TruthSeries[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-operating-point-'));
  series = await phantomDicom(dir, 'series', { seed: SEED_TEST_BASE + 6400, series: 2, kinds: 'tumor' });
  t = await startTestServer();
  installOperatingPointModel(t.dataDir);
  await importFolder(t, join(dir, 'series'));
}, 120_000);

afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

async function analyse(scanUid: string): Promise<{ job: any; result: any }> {
  const reply = await t.request('POST', `/v1/scans/${scanUid}/analyses`, { body: { model_id: OP_MODEL_ID } });
  expect(reply.status, reply.text).toBe(202);
  const job = await waitForJob(t, reply.json.data.id);
  expect(job.status, job.reason).toBe('succeeded');
  const result = await t.request('GET', `/v1/scan/results?scan_id=${scanUid}`, { headers: { 'API-Version': '1.1' } });
  return { job, result: result.json.data.items[0] };
}

describe('operating points', () => {
  it('lists the model card, the calibration and the points with the default chosen', async () => {
    const models = await t.request('GET', '/v1/models');
    const model = models.json.data.items.find((m: any) => m.id === OP_MODEL_ID);
    expect(model.status, model.error).toBe('ready');
    expect(model.operating_point).toBe('balanced');
    expect(model.operating_points.map((p: any) => [p.name, p.selected])).toEqual([['everything', false], ['balanced', true], ['nothing', false]]);
    expect(model.operating_points[1].measured).toMatchObject({ sensitivity: 0.5, false_positives_per_series: 0.5 });
    expect(model.calibration).toEqual({ method: 'platt', fitted_on: 'a test' });
    expect(model.card).toMatchObject({ limitations: ['Only for tests.'], intended_use: expect.any(String), evaluation: expect.any(String) });
    expect(model.card.training_data).toMatch(/phantom/i);
  });

  it('refuses a point the model does not offer, naming the ones it does, and keeps the choice', async () => {
    const reply = await t.request('POST', `/v1/models/${OP_MODEL_ID}/operating-point`, { body: { name: 'aggressive' } });
    expect(reply.status).toBe(400);
    expect(reply.json.error.details).toBe(`name: model ${OP_MODEL_ID} has no operating point aggressive; it offers everything, balanced, nothing`);
    const models = await t.request('GET', '/v1/models');
    expect(models.json.data.items.find((m: any) => m.id === OP_MODEL_ID).operating_point).toBe('balanced');
    const bundled = await t.request('POST', '/v1/models/mia-phantom-detector/operating-point', { body: { name: 'nope' } });
    expect(bundled.status).toBe(400);
  });

  it('runs the next analysis at the chosen point and records threshold, point and model version on each finding', async () => {
    const scan = (series[0] as TruthSeries).scan_uid;
    const chosen = await t.request('POST', `/v1/models/${OP_MODEL_ID}/operating-point`, { body: { name: 'everything' } });
    expect(chosen.status, chosen.text).toBe(200);
    expect(chosen.json.data.operating_point).toBe('everything');

    const wide = await analyse(scan);
    expect(wide.job.thresholds).toEqual({ tumor_detected: OP_POINTS.everything, hemorrhage_detected: OP_POINTS.everything, infarct_detected: OP_POINTS.everything });
    expect(wide.result.analysis).toMatchObject({ operating_point: 'everything', thresholds: wide.job.thresholds, model: { id: OP_MODEL_ID } });
    expect(wide.result.findings.length).toBeGreaterThan(0);
    for (const f of wide.result.findings) {
      expect(f).toMatchObject({ threshold: OP_POINTS.everything, operating_point: 'everything', model_version: wide.result.analysis.model.version });
      expect(f.confidence).toBeGreaterThanOrEqual(OP_POINTS.everything);
      // sigmoid(0.5 * logit(raw) + 0.3) never reaches 0.9 for raw < 0.9999: calibrated, not raw.
      expect(f.confidence).toBeLessThan(0.9);
    }

    expect((await t.request('POST', `/v1/models/${OP_MODEL_ID}/operating-point`, { body: { name: 'nothing' } })).status).toBe(200);
    const none = await analyse(scan);
    expect(none.result.analysis.operating_point).toBe('nothing');
    expect(none.result.findings).toEqual([]);
  });
});
