/**
 * Decoded pixels of every image in pydicom's corpus against pydicom's own decoding
 * (numpy/RLE handlers, GDCM for compressed data): exact for lossless transfer syntaxes,
 * within a stated tolerance for lossy ones.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDicom } from '#server/dicom/parse.ts';
import { decodeFrame } from '#server/dicom/pixels.ts';
import { findTransferSyntax } from '#server/dicom/transfer-syntax.ts';
import { CORPUS, corpusFiles, requirePydicom, runPydicom } from './helpers/reference.ts';
import { diffAgainstReference, type PydicomPixels } from './helpers/compare.ts';

/**
 * Lossy tolerances, in stored grey levels (max abs difference per sample):
 * - JPEG Baseline 4.50: libjpeg-turbo vs pydicom+Pillow after pydicom's float YCbCr->RGB: 3.
 * - JPEG Extended 4.51 12-bit: our own float-IDCT decoder vs GDCM (libjpeg 12-bit): 2.
 * - JPEG 2000 4.91: OpenJPEG on both sides: exact in practice, allow 1.
 */
const LOSSY_TOLERANCE: Readonly<Record<string, number>> = {
  '1.2.840.10008.1.2.4.50': 3,
  '1.2.840.10008.1.2.4.51': 2,
  '1.2.840.10008.1.2.4.91': 1,
};

/** Reference handler per file when the default (GDCM first) is not the one to trust. */
const HANDLER: Readonly<Record<string, string>> = {
  // GDCM ignores the Adobe APP14 "transform 0" (RGB) marker and applies YCbCr->RGB;
  // Pillow's libjpeg honours it (T.872 6.5.3), as we do.
  'SC_rgb_jpeg.dcm': 'pillow+rgb',
};

/** Images we decline to decode, with the error we give. */
const EXPECTED_DECODE_ERRORS: Readonly<Record<string, RegExp>> = {
  // A 250-byte J2K codestream for a 1024x256 image: pydicom's parser test, not a real image. Its
  // SIZ marker is garbage, so it is refused before the codec sizes anything from it.
  'JPEG2000-embedded-sequence-delimiter.dcm': /cannot decode frame 0 \(JPEG 2000 Image Compression\): codestream is 3722445056x1024, DICOM says 256x1024/,
};

/** Images pydicom cannot decode; we only check our decode succeeds. */
const PYDICOM_CANNOT: ReadonlySet<string> = new Set([
  // Number of Frames "1A" makes pydicom's pixel_array fail.
  'badVR.dcm',
]);

type Case = { name: string; file: string; ts: string };

const cases: Case[] = corpusFiles().flatMap((file) => {
  const r = parseDicom(new Uint8Array(readFileSync(file)));
  if (!r.ok || !r.instance.hasPixelData) return [];
  return [{ name: relative(CORPUS, file), file, ts: r.instance.transferSyntaxUid }];
});

describe('pixels of the pydicom corpus', () => {
  const refs = new Map<string, PydicomPixels>();
  let dir = '';

  beforeAll(() => {
    requirePydicom(true);
    dir = mkdtempSync(join(tmpdir(), 'mia-dicom-px-'));
    const specs = cases
      .filter((c) => !(c.name in EXPECTED_DECODE_ERRORS) && !PYDICOM_CANNOT.has(c.name))
      .map((c) => {
        const ts = findTransferSyntax(c.ts);
        const handler = HANDLER[c.name] ?? (ts?.encoding === 'jpeg-baseline' ? 'pillow+rgb' : '');
        return handler ? `${c.file}::${handler}` : c.file;
      });
    for (const r of runPydicom<PydicomPixels[]>(['pixels', dir, ...specs])) refs.set(r.file, r);
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('has images of every transfer syntax family in the corpus', () => {
    const families = new Set(cases.map((c) => findTransferSyntax(c.ts)?.encoding));
    for (const f of ['native', 'rle', 'jpeg-baseline', 'jpeg-extended', 'jpeg-lossless', 'jpeg-ls', 'jpeg-2000']) {
      expect(families).toContain(f);
    }
  });

  it.each(cases.map((c) => [c.name, c] as const))('%s', async (name, c) => {
    const expectedError = EXPECTED_DECODE_ERRORS[name];
    if (expectedError) {
      const bytes = new Uint8Array(readFileSync(c.file));
      const parsed = parseDicom(bytes);
      if (!parsed.ok) throw new Error(parsed.reason);
      await expect(decodeFrame(bytes, parsed.instance, 0)).rejects.toThrow(expectedError);
      return;
    }
    if (PYDICOM_CANNOT.has(name)) {
      const bytes = new Uint8Array(readFileSync(c.file));
      const parsed = parseDicom(bytes);
      if (!parsed.ok) throw new Error(parsed.reason);
      const d = await decodeFrame(bytes, parsed.instance, 0);
      expect(d.pixels.length).toBe(parsed.instance.rows * parsed.instance.columns);
      return;
    }
    const ref = refs.get(c.file);
    if (!ref) throw new Error(`no reference for ${name}`);
    const { frames } = await diffAgainstReference(c.file, ref);
    const tolerance = LOSSY_TOLERANCE[c.ts] ?? 0;
    for (const [i, f] of frames.entries()) {
      expect(f.maxAbs, `${name} frame ${i} (max |diff|, tolerance ${tolerance})`).toBeLessThanOrEqual(tolerance);
    }
  });
});

describe("'view' pixel storage (the analysis engine's)", () => {
  it.each([
    ['MR_small.dcm', true],
    ['CT_small.dcm', true],
    ['MR_small_bigendian.dcm', false],
    ['MR_small_RLE.dcm', false],
  ])('%s: the same values as a copy; a view on the file bytes: %s', async (file, shares) => {
    const bytes = new Uint8Array(readFileSync(join(CORPUS, file)));
    const parsed = parseDicom(bytes);
    if (!parsed.ok) throw new Error(parsed.reason);
    const copy = await decodeFrame(bytes, parsed.instance, 0);
    const view = await decodeFrame(bytes, parsed.instance, 0, 'view');
    expect(Array.from(view.pixels)).toEqual(Array.from(copy.pixels));
    expect(view.pixels.buffer === bytes.buffer).toBe(shares);
    expect(copy.pixels.buffer === bytes.buffer).toBe(false);
  });
});
