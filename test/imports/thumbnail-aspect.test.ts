/**
 * Worklist thumbnails keep the physical aspect of non-square pixels (issue 11): pydicom's
 * CT_small (128 x 128) rewritten with Pixel Spacing 0.94\0.47 is a 60 x 120 mm image, so its
 * thumbnail is 64 x 128 px, not a square. The rendered frame does too when asked
 * (aspect=physical, bilinear), and keeps the stored grid by default.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CT_SMALL, seedImportedInstance } from '../helpers/image-fixture.ts';
import { readPng } from '../helpers/png.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let dir: string;
beforeAll(async () => {
  t = await startTestServer();
  dir = mkdtempSync(join(tmpdir(), 'mia-thumb-aspect-'));
});
afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

/** CT_small with new UIDs and the given spacing attribute (Python statements on `ds`). */
function variant(name: string, edit: string): string {
  const out = join(dir, `${name}.dcm`);
  const script = [
    'import sys, pydicom',
    'from pydicom.uid import generate_uid',
    'ds = pydicom.dcmread(sys.argv[1])',
    'ds.SeriesInstanceUID = generate_uid()',
    'ds.SOPInstanceUID = generate_uid()',
    'ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID',
    edit,
    'ds.save_as(sys.argv[2], write_like_original=False)',
  ].join('\n');
  execFileSync('/usr/bin/python3', ['-c', script, CT_SMALL, out], { stdio: ['ignore', 'ignore', 'inherit'] });
  return out;
}

async function thumbnailSize(file: string): Promise<{ width: number; height: number }> {
  const { scanId } = await seedImportedInstance(t, file);
  const reply = await fetch(`${t.url}/v1/scans/${scanId}/thumbnail`, { headers: { Authorization: `Bearer ${t.adminKey}` } });
  expect(reply.status).toBe(200);
  const png = readPng(Buffer.from(await reply.arrayBuffer()));
  return { width: png.width, height: png.height };
}

describe('thumbnail aspect', () => {
  it('rows 0.94 mm apart, columns 0.47 mm: twice as tall as wide', async () => {
    expect(await thumbnailSize(variant('tall', 'ds.PixelSpacing = [0.94, 0.47]'))).toEqual({ width: 64, height: 128 });
  });

  it('rows 0.47 mm apart, columns 0.94 mm: twice as wide as tall', async () => {
    expect(await thumbnailSize(variant('wide', 'ds.PixelSpacing = [0.47, 0.94]'))).toEqual({ width: 128, height: 64 });
  });

  it('Imager Pixel Spacing when Pixel Spacing is absent (a radiograph)', async () => {
    expect(await thumbnailSize(variant('dx', 'del ds.PixelSpacing\nds.ImagerPixelSpacing = [0.94, 0.47]\nds.Modality = "DX"'))).toEqual({ width: 64, height: 128 });
  });

  it('square pixels stay square', async () => {
    expect(await thumbnailSize(variant('square', 'pass'))).toEqual({ width: 128, height: 128 });
  });
});

async function rendered(file: string, query: string): Promise<ReturnType<typeof readPng>> {
  const { instanceUid } = await seedImportedInstance(t, file);
  const reply = await fetch(`${t.url}/v1/instances/${instanceUid}/frames/0/rendered${query}`, { headers: { Authorization: `Bearer ${t.adminKey}` } });
  expect(reply.status).toBe(200);
  return readPng(Buffer.from(await reply.arrayBuffer()));
}

describe('rendered frame aspect', () => {
  it('aspect=physical: width:height is the physical 60.2 x 120.3 mm within 1%, stretched along the coarse axis', async () => {
    const tall = variant('tall-rendered', 'ds.PixelSpacing = [0.94, 0.47]');
    const png = await rendered(tall, '?aspect=physical');
    const physical = (128 * 0.47) / (128 * 0.94);
    expect(Math.abs(png.width / png.height / physical - 1)).toBeLessThan(0.01);
    // No detail dropped: the 128 columns stay, the rows are stretched to the column spacing.
    expect(png.width).toBe(128);
    expect(png.height).toBe(256);
    const wide = await rendered(variant('wide-rendered', 'ds.PixelSpacing = [0.47, 0.94]'), '?aspect=physical&window_center=40&window_width=400');
    expect(Math.abs(wide.width / wide.height / 2 - 1)).toBeLessThan(0.01);
  });

  it('bilinear: a stretched row lies between the rows it came from', async () => {
    const tall = variant('tall-bilinear', 'ds.PixelSpacing = [0.94, 0.47]');
    const native = await rendered(tall, '');
    const physical = await rendered(tall, '?aspect=physical');
    // Output row 2y+1 has its centre a quarter of the way from source row y to y+1 (centres aligned).
    const y = 60;
    for (let x = 0; x < 128; x += 7) {
      const a = native.pixels[(y * 128 + x) * native.channels] ?? 0;
      const b = native.pixels[((y + 1) * 128 + x) * native.channels] ?? 0;
      const got = physical.pixels[((2 * y + 1) * 128 + x) * physical.channels] ?? 0;
      expect(Math.abs(got - (0.75 * a + 0.25 * b))).toBeLessThanOrEqual(1);
    }
  });

  it('by default the stored grid, one PNG pixel per image pixel; square pixels unchanged either way', async () => {
    const tall = await rendered(variant('tall-native', 'ds.PixelSpacing = [0.94, 0.47]'), '');
    expect([tall.width, tall.height]).toEqual([128, 128]);
    const square = await rendered(variant('square-rendered', 'pass'), '?aspect=physical');
    expect([square.width, square.height]).toEqual([128, 128]);
    const dx = await rendered(variant('dx-rendered', 'del ds.PixelSpacing\nds.ImagerPixelSpacing = [0.94, 0.47]\nds.Modality = "DX"'), '?aspect=physical');
    expect([dx.width, dx.height]).toEqual([128, 256]);
  });

  it('refuses an unknown aspect', async () => {
    const { instanceUid } = await seedImportedInstance(t, variant('bad-aspect', 'pass'));
    const reply = await fetch(`${t.url}/v1/instances/${instanceUid}/frames/0/rendered?aspect=square`, { headers: { Authorization: `Bearer ${t.adminKey}` } });
    expect(reply.status).toBe(400);
  });
});
