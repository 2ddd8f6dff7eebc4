/**
 * Every supported transfer syntax on a real file: compressed variants are made here from
 * lossless native sources with dcmtk and GDCM, then decoded by us. Lossless variants must equal
 * the source exactly; lossy ones are compared with the same tool's own decompression.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDicom } from '#server/dicom/parse.ts';
import { decodeFrame, type DecodedFrame } from '#server/dicom/pixels.ts';
import { CORPUS, requireDebianTools } from './helpers/reference.ts';

const CT = `${CORPUS}/CT_small.dcm`; // 128x128, 16-bit signed
const RGB = `${CORPUS}/SC_rgb_jpeg_dcmd.dcm`; // 256x256 RGB 8-bit, implicit VR
const DOSE = `${CORPUS}/rtdose.dcm`; // 10x10x15 frames, 32-bit
const MONO8 = 'mono8.dcm'; // made in beforeAll from the deflated image_dfl.dcm

type Variant = {
  name: string;
  source: string;
  make: (src: string, out: string) => string[][];
  ts: string;
  /** 'source': exact vs the native source; else a command making the tool's own native decode. */
  reference: 'source' | ((compressed: string, out: string) => string[]);
  tolerance: number;
};

const dcmdjpeg = (c: string, o: string): string[] => ['dcmdjpeg', c, o];
const dcmdjpls = (c: string, o: string): string[] => ['dcmdjpls', c, o];
const gdcmRaw = (c: string, o: string): string[] => ['gdcmconv', '--raw', c, o];

const VARIANTS: Variant[] = [
  { name: 'RLE 16-bit signed', source: CT, make: (s, o) => [['dcmcrle', s, o]], ts: '1.2.840.10008.1.2.5', reference: 'source', tolerance: 0 },
  { name: 'RLE 8-bit RGB', source: RGB, make: (s, o) => [['dcmcrle', s, o]], ts: '1.2.840.10008.1.2.5', reference: 'source', tolerance: 0 },
  { name: 'RLE 32-bit multi-frame', source: DOSE, make: (s, o) => [['dcmcrle', s, o]], ts: '1.2.840.10008.1.2.5', reference: 'source', tolerance: 0 },
  { name: 'JPEG baseline 8-bit grey', source: MONO8, make: (s, o) => [['dcmcjpeg', '+eb', s, o]], ts: '1.2.840.10008.1.2.4.50', reference: dcmdjpeg, tolerance: 1 },
  { name: 'JPEG baseline 8-bit YBR_FULL_422', source: RGB, make: (s, o) => [['dcmcjpeg', '+eb', '+cy', '+s2', s, o]], ts: '1.2.840.10008.1.2.4.50', reference: dcmdjpeg, tolerance: 1 },
  { name: 'JPEG baseline 8-bit RGB without colour transform', source: RGB, make: (s, o) => [['dcmcjpeg', '+eb', '+cr', s, o]], ts: '1.2.840.10008.1.2.4.50', reference: dcmdjpeg, tolerance: 1 },
  { name: 'JPEG extended 12-bit', source: CT, make: (s, o) => [['dcmcjpeg', '+ee', s, o]], ts: '1.2.840.10008.1.2.4.51', reference: dcmdjpeg, tolerance: 2 },
  { name: 'JPEG extended, 8-bit grey (decoded by libjpeg-turbo)', source: MONO8, make: (s, o) => [['dcmcjpeg', '+ee', s, o]], ts: '1.2.840.10008.1.2.4.51', reference: dcmdjpeg, tolerance: 1 },
  { name: 'JPEG lossless process 14', source: CT, make: (s, o) => [['dcmcjpeg', '+el', s, o]], ts: '1.2.840.10008.1.2.4.57', reference: 'source', tolerance: 0 },
  { name: 'JPEG lossless SV1', source: CT, make: (s, o) => [['dcmcjpeg', '+e1', s, o]], ts: '1.2.840.10008.1.2.4.70', reference: 'source', tolerance: 0 },
  { name: 'JPEG lossless SV1 RGB', source: RGB, make: (s, o) => [['dcmcjpeg', '+e1', s, o]], ts: '1.2.840.10008.1.2.4.70', reference: 'source', tolerance: 0 },
  { name: 'JPEG-LS lossless', source: CT, make: (s, o) => [['dcmcjpls', '+el', s, o]], ts: '1.2.840.10008.1.2.4.80', reference: 'source', tolerance: 0 },
  { name: 'JPEG-LS lossless RGB, planes not interleaved', source: RGB, make: (s, o) => [['dcmcjpls', '+el', '+in', s, o]], ts: '1.2.840.10008.1.2.4.80', reference: 'source', tolerance: 0 },
  // dcmcjpls refuses near-lossless for signed data, so these use unsigned sources.
  { name: 'JPEG-LS near-lossless (NEAR 2) grey', source: MONO8, make: (s, o) => [['dcmcjpls', '+en', s, o]], ts: '1.2.840.10008.1.2.4.81', reference: dcmdjpls, tolerance: 0 },
  { name: 'JPEG-LS near-lossless (NEAR 2) RGB', source: RGB, make: (s, o) => [['dcmcjpls', '+en', s, o]], ts: '1.2.840.10008.1.2.4.81', reference: dcmdjpls, tolerance: 0 },
  { name: 'JPEG 2000 lossless', source: CT, make: (s, o) => [['gdcmconv', '--j2k', s, o]], ts: '1.2.840.10008.1.2.4.90', reference: 'source', tolerance: 0 },
  { name: 'JPEG 2000 lossless RGB', source: RGB, make: (s, o) => [['gdcmconv', '--j2k', s, o]], ts: '1.2.840.10008.1.2.4.90', reference: 'source', tolerance: 0 },
  { name: 'JPEG 2000 lossy', source: CT, make: (s, o) => [['gdcmconv', '--j2k', '--lossy', '-q', '30', s, o]], ts: '1.2.840.10008.1.2.4.91', reference: gdcmRaw, tolerance: 1 },
];

function run(cmd: string[], cwd: string): void {
  const [bin, ...args] = cmd;
  if (!bin) throw new Error('empty command');
  try {
    execFileSync(bin, args, { cwd, stdio: 'pipe' });
  } catch (err) {
    const stderr = (err as { stderr?: Buffer }).stderr?.toString() ?? '';
    throw new Error(`${cmd.join(' ')} failed: ${stderr}`);
  }
}

async function decodeAll(path: string): Promise<{ ts: string; frames: DecodedFrame[] }> {
  const bytes = new Uint8Array(readFileSync(path));
  const parsed = parseDicom(bytes);
  if (!parsed.ok) throw new Error(`${path}: ${parsed.reason}`);
  const frames: DecodedFrame[] = [];
  for (let f = 0; f < parsed.instance.numberOfFrames; f++) frames.push(await decodeFrame(bytes, parsed.instance, f));
  return { ts: parsed.instance.transferSyntaxUid, frames };
}

describe('generated compressed variants', () => {
  let dir = '';

  beforeAll(() => {
    requireDebianTools([
      { path: '/usr/bin/dcmcjpeg', pkg: 'dcmtk' },
      { path: '/usr/bin/dcmcjpls', pkg: 'dcmtk' },
      { path: '/usr/bin/dcmcrle', pkg: 'dcmtk' },
      { path: '/usr/bin/gdcmconv', pkg: 'libgdcm-tools' },
      { path: CORPUS, pkg: 'python3-pydicom' },
    ]);
    dir = mkdtempSync(join(tmpdir(), 'mia-dicom-gen-'));
    run(['dcmconv', '+te', `${CORPUS}/image_dfl.dcm`, MONO8], dir);
  });

  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it.each(VARIANTS.map((v, i) => [v.name, v, i] as const))('%s', async (_name, v, i) => {
    const compressed = join(dir, `v${i}.dcm`);
    for (const cmd of v.make(v.source, compressed)) run(cmd, dir);
    const ours = await decodeAll(compressed);
    expect(ours.ts).toBe(v.ts);
    let referencePath = v.source.startsWith('/') ? v.source : join(dir, v.source);
    if (v.reference !== 'source') {
      referencePath = join(dir, `v${i}-ref.dcm`);
      run(v.reference(compressed, referencePath), dir);
    }
    const ref = await decodeAll(referencePath);
    expect(ours.frames.length).toBe(ref.frames.length);
    for (const [f, d] of ours.frames.entries()) {
      const r = ref.frames[f];
      if (!r) throw new Error('missing reference frame');
      expect([d.rows, d.columns, d.samplesPerPixel]).toEqual([r.rows, r.columns, r.samplesPerPixel]);
      expect(d.photometricInterpretation).toBe(r.photometricInterpretation);
      let maxAbs = 0;
      for (let k = 0; k < d.pixels.length; k++) maxAbs = Math.max(maxAbs, Math.abs((d.pixels[k] ?? 0) - (r.pixels[k] ?? 0)));
      expect(maxAbs, `frame ${f} max |diff| (tolerance ${v.tolerance})`).toBeLessThanOrEqual(v.tolerance);
    }
  });
});
