/**
 * Enhanced CT multi-frame (issue 11, item 1): the same phantom pixels as a classic series and as
 * one Enhanced CT file whose rescale, spacing, position, orientation and windows live only in the
 * functional groups (PS3.3 C.7.6.16). Imported, listed, rendered and analysed over HTTP, the
 * Enhanced form must give what the classic form gives: intercept -1024 and the spacing, the same
 * pictures, and the same lesion found on the same slice.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { enhancedCt, philipsMprage, type EnhancedCt } from '../helpers/enhanced.ts';
import { readPng } from '../helpers/png.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { importFolder, matches, phantomDicom, waitForJob, type ResultFinding, type TruthSeries } from './analysis-helpers.ts';
import { SEED_TEST_BASE } from './helpers.ts';
import { parseDicom } from '#server/dicom/parse.ts';

const SEED = SEED_TEST_BASE + 6500;
const SEED_MR = SEED_TEST_BASE + 6510;

let t: TestServer;
let dir: string;
let truth: TruthSeries;
let shared: EnhancedCt;
let perFrame: EnhancedCt;
let short: EnhancedCt;
let interleaved: EnhancedCt;
let tilted: EnhancedCt;
let mrTruth: TruthSeries;
let mr: EnhancedCt;
let philips: { scanId: string; instanceUid: string };

async function bytesOf(path: string): Promise<{ status: number; body: Buffer; headers: Headers }> {
  const res = await fetch(t.url + path, { headers: { Authorization: `Bearer ${t.adminKey}` } });
  return { status: res.status, body: Buffer.from(await res.arrayBuffer()), headers: res.headers };
}

async function analyse(scanId: string): Promise<{ status: string; reason: string | null; findings: ResultFinding[] }> {
  const reply = await t.request('POST', `/v1/scans/${scanId}/analyses`, { body: {} });
  expect(reply.status, reply.text).toBe(202);
  const job = await waitForJob(t, reply.json.data.id, 120_000);
  const results = await t.request('GET', `/v1/scans/${scanId}/results`);
  return { status: job.status, reason: job.reason ?? null, findings: results.json.data?.findings ?? [] };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-enhanced-ct-'));
  [truth] = (await phantomDicom(dir, 'series/classic', { seed: SEED, series: 1, modality: 'CT', kinds: 'infarct' })) as [TruthSeries];
  const classicDir = join(dir, 'series', 'classic', `series-${SEED}-CT`);
  mkdirSync(join(dir, 'series', 'enhanced'));
  shared = enhancedCt(classicDir, join(dir, 'series', 'enhanced', 'shared.dcm'));
  perFrame = enhancedCt(classicDir, join(dir, 'series', 'enhanced', 'per-frame.dcm'), { perFrameIntercept: true });
  short = enhancedCt(classicDir, join(dir, 'series', 'enhanced', 'short.dcm'), { dropLastItem: true });
  interleaved = enhancedCt(classicDir, join(dir, 'series', 'enhanced', 'interleaved.dcm'), { interleave: true });
  tilted = enhancedCt(classicDir, join(dir, 'series', 'enhanced', 'tilted.dcm'), { tiltFrame: true });
  [mrTruth] = (await phantomDicom(dir, 'series/mr', { seed: SEED_MR, series: 1, modality: 'MR', kinds: 'tumor' })) as [TruthSeries];
  // Philips writes Enhanced MR with a per-frame Rescale Slope (nibabel's philips_mprage.dcm: 2.108).
  mr = enhancedCt(join(dir, 'series', 'mr', `series-${SEED_MR}-MR`), join(dir, 'series', 'enhanced', 'mr.dcm'), { slope: 2.108 });
  const mprage = philipsMprage();
  writeFileSync(join(dir, 'series', 'enhanced', 'philips_mprage.dcm'), mprage);
  const parsed = parseDicom(mprage);
  if (!parsed.ok) throw new Error(parsed.reason);
  philips = { scanId: parsed.instance.seriesInstanceUid, instanceUid: parsed.instance.sopInstanceUid };
  t = await startTestServer();
  await importFolder(t, join(dir, 'series'));
}, 120_000);

afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('Enhanced CT (functional groups) against its classic form', () => {
  it('the instance API reports the shared group rescale and spacing, not 0 and null', async () => {
    const classic = (await t.request('GET', `/v1/scans/${truth.scan_uid}/instances`)).json.data.items[0];
    const list = await t.request('GET', `/v1/scans/${shared.series_uid}/instances`);
    expect(list.status, list.text).toBe(200);
    const [item] = list.json.data.items;
    expect(item).toMatchObject({ frames: truth.slices, rescale_slope: 1, rescale_intercept: -1024, pixel_spacing: classic.pixel_spacing });
    expect(item.pixel_spacing).not.toBeNull();
    expect(item.window_center).toBe(classic.window_center);
    expect(item.window_width).toBe(classic.window_width);
    expect(item.position).toBeCloseTo(classic.position, 3);
    expect(classic.frame_values).toBeNull();
    expect(item.frames_problem).toBeNull();
  });

  it('the instance API lists each frame\'s own position, spacing, rescale and window', async () => {
    const classic = (await t.request('GET', `/v1/scans/${truth.scan_uid}/instances`)).json.data.items;
    const byUid = new Map(classic.map((c: any) => [c.instance_uid, c]));
    const [item] = (await t.request('GET', `/v1/scans/${perFrame.series_uid}/instances`)).json.data.items;
    expect(item.frame_values).toHaveLength(truth.slices);
    item.frame_values.forEach((f: any, k: number) => {
      const c: any = byUid.get(perFrame.classic[k]);
      expect(f.position).toBeCloseTo(c.position, 3);
      expect(f).toMatchObject({ pixel_spacing: c.pixel_spacing, rescale_slope: 1, rescale_intercept: k % 2 === 1 ? -1048 : -1024, window_center: c.window_center, window_width: c.window_width });
      expect(f.image_position).toHaveLength(3);
    });
  });

  it('renders each frame as the classic slice is rendered, with the frame\'s own rescale', async () => {
    for (const k of [0, 1, Math.floor(truth.slices / 2)]) {
      const classic = await bytesOf(`/v1/instances/${shared.classic[k]}/frames/0/rendered`);
      expect(classic.status).toBe(200);
      for (const enhanced of [shared, perFrame]) {
        const png = await bytesOf(`/v1/instances/${enhanced.instance_uid}/frames/${k}/rendered`);
        expect(png.status).toBe(200);
        expect(png.body.equals(classic.body), `${enhanced.instance_uid} frame ${k}`).toBe(true);
        // Twice: the second is served from the frame cache and must keep the frame's values.
        expect((await bytesOf(`/v1/instances/${enhanced.instance_uid}/frames/${k}/rendered`)).body.equals(classic.body)).toBe(true);
      }
    }
  });

  it('the thumbnail of an interleaved Enhanced image is its middle slice in space, as the classic one\'s', async () => {
    const classic = await bytesOf(`/v1/scans/${truth.scan_uid}/thumbnail`);
    const thumbnail = await bytesOf(`/v1/scans/${interleaved.series_uid}/thumbnail`);
    expect(thumbnail.status).toBe(200);
    expect(thumbnail.body.equals(classic.body)).toBe(true);
  });

  it('raw frames carry the frame\'s own rescale and window', async () => {
    const even = await bytesOf(`/v1/instances/${perFrame.instance_uid}/frames/0/raw`);
    const odd = await bytesOf(`/v1/instances/${perFrame.instance_uid}/frames/1/raw`);
    const classic = await bytesOf(`/v1/instances/${perFrame.classic[1]}/frames/0/raw`);
    expect(even.headers.get('X-Rescale-Intercept')).toBe('-1024');
    expect(odd.headers.get('X-Rescale-Intercept')).toBe('-1048');
    expect(odd.headers.get('X-Window-Center')).toBe(classic.headers.get('X-Window-Center'));
    expect(odd.headers.get('X-Window-Width')).toBe(classic.headers.get('X-Window-Width'));
  });

  it('finds the lesion exactly as in the classic form: same label, slice, box and confidence', async () => {
    const classic = await analyse(truth.scan_uid);
    expect(classic.status).toBe('succeeded');
    const lesion = truth.lesions[0]!;
    expect(classic.findings.some((f) => matches(f, lesion)), JSON.stringify(classic.findings)).toBe(true);
    // interleaved: frames stored even slices first, so only their Plane Positions give the stack.
    for (const enhanced of [shared, perFrame, interleaved]) {
      const result = await analyse(enhanced.series_uid);
      expect(result.status, result.reason ?? '').toBe('succeeded');
      expect(result.findings).toHaveLength(classic.findings.length);
      for (const c of classic.findings) {
        const frame = enhanced.classic.indexOf(c.instance_uid);
        const e = result.findings.find((f) => f.frame === frame && f.label === c.label);
        expect(e, `${c.label} on frame ${frame}: ${JSON.stringify(result.findings)}`).toBeDefined();
        if (!e) continue;
        expect(e.instance_uid).toBe(enhanced.instance_uid);
        for (const side of ['x', 'y', 'width', 'height'] as const) expect(Math.abs(e.location[side] - c.location[side])).toBeLessThanOrEqual(3);
        expect(Math.abs(e.confidence - c.confidence)).toBeLessThanOrEqual(0.02);
      }
    }
  }, 240_000);

  it('a file whose Per-frame sequence lacks a frame\'s item is not applicable, with the reason, never "0 findings"', async () => {
    const result = await analyse(short.series_uid);
    expect(result.status).toBe('not_applicable');
    expect(result.reason).toContain('Per-frame Functional Groups Sequence (5200,9230) has');
    // Every frame then has the shared values only: the API lists no frame values of its own.
    const [item] = (await t.request('GET', `/v1/scans/${short.series_uid}/instances`)).json.data.items;
    expect(item).toMatchObject({ rescale_intercept: -1024, frame_values: null });
    expect(item.frames_problem).toBe(`Per-frame Functional Groups Sequence (5200,9230) has ${truth.slices - 1} item(s) for ${truth.slices} frame(s)`);
  }, 120_000);

  it('frames with different Plane Orientations are not one stack: not applicable, with the reason', async () => {
    const result = await analyse(tilted.series_uid);
    expect(result.status).toBe('not_applicable');
    expect(result.reason).toContain('frame 1 has another Plane Orientation (0020,9116)');
  }, 120_000);
});

describe('Enhanced MR with a per-frame Rescale Slope (as Philips writes it)', () => {
  it('reports, serves and renders the slope of each frame, not 1', async () => {
    const [item] = (await t.request('GET', `/v1/scans/${mr.series_uid}/instances`)).json.data.items;
    expect(item.rescale_slope).toBe(2.108);
    expect(item.frame_values.every((f: any) => f.rescale_slope === 2.108)).toBe(true);
    const raw = await bytesOf(`/v1/instances/${mr.instance_uid}/frames/3/raw`);
    expect(raw.headers.get('X-Rescale-Slope')).toBe('2.108');
    const classicRaw = await bytesOf(`/v1/instances/${mr.classic[3]}/frames/0/raw`);
    expect(raw.body.equals(classicRaw.body)).toBe(true);
    expect(Number(raw.headers.get('X-Window-Center'))).toBeCloseTo(Number(classicRaw.headers.get('X-Window-Center')) * 2.108, 1);
    // The window scales with the values, so the picture is the classic one's (PS3.3 C.11.2.1.2
    // windows by c - 0.5 and w - 1, not scale-free: a grey level may round the other way).
    const [png, classicPng] = [await bytesOf(`/v1/instances/${mr.instance_uid}/frames/3/rendered`), await bytesOf(`/v1/instances/${mr.classic[3]}/frames/0/rendered`)];
    const a = readPng(png.body);
    const b = readPng(classicPng.body);
    expect([a.width, a.height]).toEqual([b.width, b.height]);
    let worst = 0;
    for (let i = 0; i < a.pixels.length; i++) worst = Math.max(worst, Math.abs((a.pixels[i] ?? 0) - (b.pixels[i] ?? 0)));
    expect(worst).toBeLessThanOrEqual(1);
  });

  it('finds the lesion as in the classic form', async () => {
    const classic = await analyse(mrTruth.scan_uid);
    expect(classic.status).toBe('succeeded');
    expect(classic.findings.some((f) => matches(f, mrTruth.lesions[0]!)), JSON.stringify(classic.findings)).toBe(true);
    const result = await analyse(mr.series_uid);
    expect(result.status, result.reason ?? '').toBe('succeeded');
    expect(result.findings).toHaveLength(classic.findings.length);
    for (const c of classic.findings) {
      const e = result.findings.find((f) => f.frame === mr.classic.indexOf(c.instance_uid) && f.label === c.label);
      expect(e, JSON.stringify(result.findings)).toBeDefined();
      for (const side of ['x', 'y', 'width', 'height'] as const) expect(Math.abs(e!.location[side] - c.location[side])).toBeLessThanOrEqual(3);
      expect(Math.abs(e!.confidence - c.confidence)).toBeLessThanOrEqual(0.02);
    }
  }, 240_000);
});

describe("nibabel's philips_mprage.dcm (a real Philips Enhanced MR)", () => {
  it('reports and serves the per-frame Rescale Slope 2.108, not 1, with the functional groups spacing and each frame\'s window', async () => {
    const [item] = (await t.request('GET', `/v1/scans/${philips.scanId}/instances`)).json.data.items;
    expect(item).toMatchObject({ frames: 176, rescale_slope: 2.1079365079365, rescale_intercept: 0, pixel_spacing: [1, 1], window_center: 13, window_width: 23 });
    expect(item.frame_values).toHaveLength(176);
    expect(item.frame_values.every((f: any) => f.rescale_slope === 2.1079365079365)).toBe(true);
    const raw = await bytesOf(`/v1/instances/${philips.instanceUid}/frames/88/raw`);
    expect(raw.status).toBe(200);
    expect(raw.headers.get('X-Rescale-Slope')).toBe('2.1079365079365');
    // Philips windows each frame on its own (Frame VOI LUT): frame 88's is 1070/1860, frame 0's 13/23.
    expect([raw.headers.get('X-Window-Center'), raw.headers.get('X-Window-Width')]).toEqual(['1070', '1860']);
    expect(item.frame_values[88]).toMatchObject({ window_center: 1070, window_width: 1860 });
  });
});
