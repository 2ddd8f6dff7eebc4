/**
 * Image access for viewers, checked against pydicom: raw values byte for byte, rendered PNGs
 * equal to the VOI window of pydicom's pixels, slice order by position, thumbnails.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { windowTo8Bit } from '#server/dicom/modality.ts';
import { PYTHON, requirePydicom, runPydicom } from '../dicom/helpers/reference.ts';
import { CT_SMALL } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { followJob, makePhantoms, readPng } from './helpers.ts';

let t: TestServer;
const work = mkdtempSync(join(tmpdir(), 'mia-images-'));
let ct: { uid: string; scanId: string };

async function get(path: string, accept?: string): Promise<{ status: number; headers: Headers; body: Buffer; json: any }> {
  const headers: Record<string, string> = { Authorization: `Bearer ${t.adminKey}` };
  if (accept) headers['Accept'] = accept;
  const reply = await fetch(`${t.url}${path}`, { headers });
  const body = Buffer.from(await reply.arrayBuffer());
  let json: any;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    json = undefined;
  }
  return { status: reply.status, headers: reply.headers, body, json };
}

beforeAll(async () => {
  requirePydicom();
  t = await startTestServer();
  const upload = await t.request('POST', '/v1/instances', { rawBody: readFileSync(CT_SMALL), headers: { 'Content-Type': 'application/dicom' } });
  ct = { uid: upload.json.data.outcomes[0].sop_instance_uid, scanId: upload.json.data.outcomes[0].scan_id };
});
afterAll(async () => {
  await t.close();
  rmSync(work, { recursive: true, force: true });
});

describe('CT_small.dcm', () => {
  let reference: Int16Array;
  beforeAll(() => {
    const [ref] = runPydicom<Array<{ raw: string; dtype: string; shape: number[] }>>(['pixels', work, `${CT_SMALL}::numpy`]);
    expect(ref!.dtype).toBe('int16');
    const bytes = readFileSync(ref!.raw);
    reference = new Int16Array(bytes.buffer, bytes.byteOffset, bytes.length / 2);
  });

  it('lists the instance with its display attributes', async () => {
    const list = await get(`/v1/scans/${ct.scanId}/instances`);
    expect(list.status).toBe(200);
    expect(list.json.data).toEqual({
      items: [
        {
          instance_uid: ct.uid,
          instance_number: 1,
          position: expect.any(Number),
          rows: 128,
          columns: 128,
          frames: 1,
          transfer_syntax: '1.2.840.10008.1.2.1',
          pixel_spacing: [0.661468, 0.661468],
          pixel_spacing_source: 'pixel_spacing',
          photometric: 'MONOCHROME2',
          rescale_slope: 1,
          rescale_intercept: -1024,
          window_center: null,
          window_width: null,
          frame_values: null,
          frames_problem: null,
          image_orientation: [1, 0, 0, 0, 1, 0],
        },
      ],
      next_cursor: null,
    });
  });

  it('raw: stored values equal pydicom\'s exactly, little-endian Int16, with headers', async () => {
    const raw = await get(`/v1/instances/${ct.uid}/frames/0/raw`);
    expect(raw.status).toBe(200);
    expect(raw.headers.get('content-type')).toBe('application/octet-stream');
    expect({
      rows: raw.headers.get('x-rows'),
      columns: raw.headers.get('x-columns'),
      samples: raw.headers.get('x-samples-per-pixel'),
      bits: raw.headers.get('x-bits-allocated'),
      representation: raw.headers.get('x-pixel-representation'),
      slope: raw.headers.get('x-rescale-slope'),
      intercept: raw.headers.get('x-rescale-intercept'),
      photometric: raw.headers.get('x-photometric-interpretation'),
    }).toEqual({ rows: '128', columns: '128', samples: '1', bits: '16', representation: '1', slope: '1', intercept: '-1024', photometric: 'MONOCHROME2' });
    // No window in the file: the CT default preset is announced.
    expect(raw.headers.get('x-window-center')).toBe('40');
    expect(raw.headers.get('x-window-width')).toBe('80');
    expect(raw.body.equals(Buffer.from(reference.buffer, reference.byteOffset, reference.byteLength))).toBe(true);
  });

  it('rendered: the PNG is pydicom\'s pixels, rescaled and windowed to 8 bits', async () => {
    const hu = Float64Array.from(reference, (v) => v - 1024);
    for (const [center, width] of [[40, 400], [-600, 1500], [300, 1]]) {
      const reply = await get(`/v1/instances/${ct.uid}/frames/0/rendered?window_center=${center}&window_width=${width}`);
      expect(reply.status).toBe(200);
      expect(reply.headers.get('content-type')).toBe('image/png');
      const png = readPng(reply.body);
      expect([png.width, png.height, png.channels]).toEqual([128, 128, 1]);
      expect(Buffer.from(png.pixels).equals(Buffer.from(windowTo8Bit(hu, { center: center!, width: width! })))).toBe(true);
    }
    const byDefault = readPng((await get(`/v1/instances/${ct.uid}/frames/0/rendered`)).body);
    expect(Buffer.from(byDefault.pixels).equals(Buffer.from(windowTo8Bit(hu, { center: 40, width: 80 })))).toBe(true);
  });

  it('rejects a bad window (400), a frame out of range (404) and an unknown instance (404)', async () => {
    expect((await get(`/v1/instances/${ct.uid}/frames/0/rendered?window_center=40`)).status).toBe(400);
    expect((await get(`/v1/instances/${ct.uid}/frames/0/rendered?window_center=40&window_width=0`)).status).toBe(400);
    const frame = await get(`/v1/instances/${ct.uid}/frames/1/raw`);
    expect(frame.status).toBe(404);
    expect(frame.json.error.details).toMatch(/has 1 frame/);
    expect((await get('/v1/instances/1.2.3.4/frames/0/rendered')).status).toBe(404);
  });
});

describe('a generated CT series', () => {
  let scanId: string;
  let expected: Array<{ uid: string; position: number }>;

  beforeAll(async () => {
    const dir = join(work, 'phantoms');
    makePhantoms(dir, { series: 1, seed: 11, size: 200, slices: 9, modality: 'CT' });
    const started = await t.request('POST', '/v1/imports', { body: { path: dir } });
    await followJob(t, started.json.data.id);
    const job = (await t.request('GET', `/v1/imports/${started.json.data.id}`)).json.data;
    expect(job.counts).toMatchObject({ imported: 9, rejected: 0 });
    // pydicom's reading of the geometry: position = IPP . (row x column cosines).
    const script = `
import json, sys, glob, pydicom, numpy as np
out = []
for f in glob.glob(sys.argv[1] + '/**/*.dcm', recursive=True):
    d = pydicom.dcmread(f, stop_before_pixels=True)
    o = np.array([float(v) for v in d.ImageOrientationPatient])
    n = np.cross(o[:3], o[3:])
    out.append({'uid': str(d.SOPInstanceUID), 'series': str(d.SeriesInstanceUID), 'position': float(np.dot([float(v) for v in d.ImagePositionPatient], n))})
print(json.dumps(out))`;
    const rows = JSON.parse(execFileSync(PYTHON, ['-c', script, dir], { encoding: 'utf8' })) as Array<{ uid: string; series: string; position: number }>;
    scanId = rows[0]!.series;
    expected = rows.sort((a, b) => a.position - b.position);
  });

  it('lists instances ordered by position along the slice normal, paging with a cursor', async () => {
    const first = await get(`/v1/scans/${scanId}/instances?limit=5`);
    const second = await get(`/v1/scans/${scanId}/instances?limit=5&cursor=${first.json.data.next_cursor}`);
    expect(second.json.data.next_cursor).toBeNull();
    const items = [...first.json.data.items, ...second.json.data.items];
    expect(items.map((i: any) => i.instance_uid)).toEqual(expected.map((e) => e.uid));
    items.forEach((item: any, i: number) => expect(item.position).toBeCloseTo(expected[i]!.position, 4));
    expect((await get(`/v1/scans/${scanId}/instances?limit=2001`)).status).toBe(400);
  });

  it('serves a thumbnail of the middle slice, longest side 128 px', async () => {
    const thumb = await get(`/v1/scans/${scanId}/thumbnail`);
    expect(thumb.status).toBe(200);
    expect(thumb.headers.get('content-type')).toBe('image/png');
    const png = readPng(thumb.body);
    expect(Math.max(png.width, png.height)).toBe(128);
    // Not a blank image: a head phantom has dark background and bright skull.
    expect(Math.max(...png.pixels) - Math.min(...png.pixels)).toBeGreaterThan(100);
    const small = readPng((await get(`/v1/scans/${ct.scanId}/thumbnail`)).body);
    expect(Math.max(small.width, small.height)).toBeLessThanOrEqual(128);
  });

  it('answers image requests that ask for image/png (as an <img> or a viewer does), refuses JSON-only ones', async () => {
    for (const accept of ['image/png', 'image/*', 'image/avif,image/webp,*/*;q=0.8']) {
      expect((await get(`/v1/scans/${scanId}/thumbnail`, accept)).status, accept).toBe(200);
    }
    const refused = await get(`/v1/scans/${scanId}/thumbnail`, 'application/json');
    expect(refused.status).toBe(406);
    expect(refused.json.error.details).toBe('supported formats: image/png');
  });
});
