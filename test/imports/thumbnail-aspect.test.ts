/**
 * Worklist thumbnails keep the physical aspect of non-square pixels (issue 11): pydicom's
 * CT_small (128 x 128) rewritten with Pixel Spacing 0.94\0.47 is a 60 x 120 mm image, so its
 * thumbnail is 64 x 128 px, not a square.
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
  const { scanId } = seedImportedInstance(t, file);
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
