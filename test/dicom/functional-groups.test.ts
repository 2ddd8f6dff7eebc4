/**
 * Enhanced multi-frame CT (PS3.3 C.7.6.16, C.8.15): rescale, spacing, plane position and
 * orientation and windows live only in the Shared and Per-frame Functional Groups. Files are
 * built from a classic phantom series (enhanced_ct.py), then re-encoded by dcmtk in implicit VR
 * and big endian, so sequence items are read in every encoding.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { frameValues, parseDicom, type DicomInstance } from '#server/dicom/parse.ts';
import { decodeFrame } from '#server/dicom/pixels.ts';
import { enhancedCt, philipsMprage } from '../helpers/enhanced.ts';
import { makePhantoms } from '../imports/helpers.ts';

let dir: string;
let classicDir: string;

function parse(file: string): { instance: DicomInstance; bytes: Uint8Array } {
  const bytes = new Uint8Array(readFileSync(file));
  const result = parseDicom(bytes);
  if (!result.ok) throw new Error(result.reason);
  return { instance: result.instance, bytes };
}

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'mia-fg-'));
  makePhantoms(join(dir, 'classic'), { series: 1, seed: 20006301, size: 64, slices: 6, modality: 'CT' });
  classicDir = join(dir, 'classic', 'series-20006301-CT');
  enhancedCt(classicDir, join(dir, 'shared.dcm'));
  enhancedCt(classicDir, join(dir, 'per-frame.dcm'), { perFrameIntercept: true });
  enhancedCt(classicDir, join(dir, 'short.dcm'), { dropLastItem: true });
  execFileSync('dcmconv', ['+ti', join(dir, 'per-frame.dcm'), join(dir, 'per-frame-implicit.dcm')]);
  execFileSync('dcmconv', ['+tb', join(dir, 'per-frame.dcm'), join(dir, 'per-frame-big.dcm')]);
}, 120_000);

afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('functional groups', () => {
  it('reads the shared Pixel Value Transformation, Pixel Measures, Plane Orientation and Frame VOI LUT', () => {
    const { instance } = parse(join(dir, 'shared.dcm'));
    const classic = parse(join(classicDir, 'IM0001.dcm')).instance;
    expect(instance.numberOfFrames).toBe(6);
    expect(instance.frames).toHaveLength(6);
    expect(instance.functionalGroupsProblem).toBeNull();
    // Instance-level fields hold frame 0's values: what the instance API and index report.
    expect(instance).toMatchObject({ rescaleSlope: 1, rescaleIntercept: -1024, pixelSpacing: classic.pixelSpacing });
    expect(instance.imageOrientationPatient).toEqual([1, 0, 0, 0, 1, 0]);
    expect(instance.windowCenter).toEqual(classic.windowCenter);
    expect(instance.windowWidth).toEqual(classic.windowWidth);
    for (let k = 0; k < 6; k++) {
      const slice = parse(join(classicDir, `IM000${k + 1}.dcm`)).instance;
      expect(frameValues(instance, k)).toMatchObject({
        rescaleIntercept: -1024,
        imagePositionPatient: slice.imagePositionPatient,
        pixelSpacing: slice.pixelSpacing,
        sliceThickness: slice.sliceThickness,
      });
    }
  });

  it.each(['per-frame.dcm', 'per-frame-implicit.dcm', 'per-frame-big.dcm'])('uses each frame its own rescale where they vary (%s)', async (file) => {
    const { instance, bytes } = parse(join(dir, file));
    expect(instance.frames.map((f) => f.rescaleIntercept)).toEqual([-1024, -1048, -1024, -1048, -1024, -1048]);
    // Stored values differ by the shift; modality values equal the classic slice's.
    for (const k of [0, 1]) {
      const classicFile = parse(join(classicDir, `IM000${k + 1}.dcm`));
      const classicFrame = await decodeFrame(classicFile.bytes, classicFile.instance, 0);
      const frame = await decodeFrame(bytes, instance, k);
      const v = frameValues(instance, k);
      const hu = Array.from(frame.pixels, (p) => p * v.rescaleSlope + v.rescaleIntercept);
      const classicHu = Array.from(classicFrame.pixels, (p) => p * classicFile.instance.rescaleSlope + classicFile.instance.rescaleIntercept);
      expect(hu).toEqual(classicHu);
    }
  });

  it('a Per-frame sequence without one item per frame is not guessed at: shared values only, with the reason', () => {
    const { instance } = parse(join(dir, 'short.dcm'));
    expect(instance.functionalGroupsProblem).toBe('Per-frame Functional Groups Sequence (5200,9230) has 5 item(s) for 6 frame(s)');
    expect(instance.frames).toHaveLength(6);
    expect(frameValues(instance, 3)).toMatchObject({ rescaleIntercept: -1024, imagePositionPatient: null });
    expect(instance.pixelSpacing).not.toBeNull();
  });

  it('nibabel\'s philips_mprage.dcm (real Philips Enhanced MR): each frame\'s slope 2.108, not 1, and its own place', () => {
    const result = parseDicom(philipsMprage());
    if (!result.ok) throw new Error(result.reason);
    const i = result.instance;
    expect(i.sopClassUid).toBe('1.2.840.10008.5.1.4.1.1.4.1');
    expect(i.numberOfFrames).toBe(176);
    expect(i.functionalGroupsProblem).toBeNull();
    expect(i.frames).toHaveLength(176);
    expect(i.rescaleSlope).toBeCloseTo(2.1079365079365, 12);
    expect(i.frames.every((f) => f.rescaleSlope === i.rescaleSlope && f.rescaleIntercept === 0)).toBe(true);
    expect(i.pixelSpacing).toEqual([1, 1]);
    expect(i.sliceThickness).toBe(1);
    expect([i.windowCenter, i.windowWidth]).toEqual([[13], [23]]);
    expect(frameValues(i, 0).imagePositionPatient).toEqual([92.7090416119899, -125.12766968458, 136.495256863534]);
    expect(frameValues(i, 1).imagePositionPatient).toEqual([91.7096061871852, -125.12766968458, 136.529122076928]);
    // Sagittal: rows run anterior-posterior, columns head-foot.
    expect(frameValues(i, 0).imageOrientationPatient?.map((c) => Math.round(c) + 0)).toEqual([0, 1, 0, 0, 0, -1]);
  });

  it('classic files have no frame list and frameValues gives their top-level values', () => {
    const { instance } = parse(join(classicDir, 'IM0001.dcm'));
    expect(instance.frames).toEqual([]);
    expect(frameValues(instance, 0)).toMatchObject({ rescaleIntercept: instance.rescaleIntercept, imagePositionPatient: instance.imagePositionPatient });
  });
});
