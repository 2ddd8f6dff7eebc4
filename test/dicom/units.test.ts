/**
 * Unit tests beside the hard pure logic: PackBits/RLE segment order, Bits Stored masking with
 * sign extension, native layouts, YBR conversion, VOI windowing, UIDs and character sets.
 */
import { describe, expect, it } from 'vitest';
import { decodeRle, unpackBitsSegment } from '#server/dicom/rle.ts';
import { maskStoredBits, type FrameGeometry } from '#server/dicom/pixel-types.ts';
import { decodeNative } from '#server/dicom/native.ts';
import { applyRescale, windowOptions, windowTo8Bit, ybrFullToRgb } from '#server/dicom/modality.ts';
import { parseUid, isStrictUid } from '#server/dicom/uid.ts';
import { decodeText } from '#server/dicom/charset.ts';
import { parseDicom } from '#server/dicom/parse.ts';
import { decodeFrame } from '#server/dicom/pixels.ts';

const geometry = (over: Partial<FrameGeometry>): FrameGeometry => ({
  rows: 1,
  columns: 2,
  samplesPerPixel: 1,
  bitsAllocated: 16,
  bitsStored: 16,
  highBit: 15,
  pixelRepresentation: 0,
  planarConfiguration: 0,
  photometricInterpretation: 'MONOCHROME2',
  ...over,
});

/** Builds an RLE frame from already PackBits-encoded segments (PS3.5 G.5 header). */
function rleFrame(segments: number[][]): Uint8Array {
  const header = new Uint8Array(64);
  const view = new DataView(header.buffer);
  view.setUint32(0, segments.length, true);
  let offset = 64;
  segments.forEach((s, i) => {
    view.setUint32(4 + i * 4, offset, true);
    offset += s.length;
  });
  return Uint8Array.from([...header, ...segments.flat()]);
}

describe('RLE', () => {
  it('decodes literal, replicate and no-op runs (G.3.1)', () => {
    const out = new Uint8Array(6);
    unpackBitsSegment(Uint8Array.from([1, 7, 8, 0x80, 0xfd, 9]), out);
    expect([...out]).toEqual([7, 8, 9, 9, 9, 9]);
  });

  it('rejects a segment that decodes short', () => {
    expect(() => unpackBitsSegment(Uint8Array.from([0, 1]), new Uint8Array(3))).toThrow(/decodes to 1 bytes, expected 3/);
  });

  it('puts the most significant byte segment first, sample by sample (G.2)', () => {
    // 2 pixels RGB 16-bit: segments R-hi, R-lo, G-hi, G-lo, B-hi, B-lo.
    const frame = rleFrame([[1, 0x01, 0x02], [1, 0x03, 0x04], [1, 0x05, 0x06], [1, 0x07, 0x08], [1, 0x09, 0x0a], [1, 0x0b, 0x0c]]);
    const d = decodeRle(frame, geometry({ samplesPerPixel: 3, photometricInterpretation: 'RGB' }));
    expect([...d.pixels]).toEqual([0x0103, 0x0507, 0x090b, 0x0204, 0x0608, 0x0a0c]);
  });

  it('decodes 32-bit samples from four segments', () => {
    const frame = rleFrame([[0, 0x12], [0, 0x34], [0, 0x56], [0, 0x78]]);
    const d = decodeRle(frame, geometry({ columns: 1, bitsAllocated: 32, bitsStored: 32, highBit: 31 }));
    expect(d.pixels).toBeInstanceOf(Uint32Array);
    expect(d.pixels[0]).toBe(0x12345678);
  });

  it('rejects a header with the wrong number of segments', () => {
    expect(() => decodeRle(rleFrame([[0, 1]]), geometry({}))).toThrow(/1 segments, expected 2/);
  });
});

describe('Bits Stored masking', () => {
  it('drops bits above High Bit and sign-extends signed 12-bit values', () => {
    const raw = Uint16Array.from([0xf800, 0x07ff, 0x0fff, 0x1001]);
    const out = maskStoredBits(raw, { bitsAllocated: 16, bitsStored: 12, highBit: 11, pixelRepresentation: 1 });
    expect(out).toBeInstanceOf(Int16Array);
    expect([...out]).toEqual([-2048, 2047, -1, 1]);
  });

  it('masks unsigned values without changing the type', () => {
    const out = maskStoredBits(Uint16Array.from([0xf123]), { bitsAllocated: 16, bitsStored: 12, highBit: 11, pixelRepresentation: 0 });
    expect(out).toBeInstanceOf(Uint16Array);
    expect([...out]).toEqual([0x123]);
  });

  it('keeps full-width signed 32-bit values', () => {
    const out = maskStoredBits(Uint32Array.from([0xffffffff]), { bitsAllocated: 32, bitsStored: 32, highBit: 31, pixelRepresentation: 1 });
    expect([...out]).toEqual([-1]);
  });
});

describe('native layouts', () => {
  it('reads big endian words and interleaves planar colour', () => {
    const g = geometry({ samplesPerPixel: 3, bitsAllocated: 8, bitsStored: 8, highBit: 7, planarConfiguration: 1, photometricInterpretation: 'RGB' });
    const d = decodeNative(Uint8Array.from([1, 2, 3, 4, 5, 6]), 0, g, false);
    expect([...d.pixels]).toEqual([1, 3, 5, 2, 4, 6]);
    const be = decodeNative(Uint8Array.from([0x01, 0x02, 0xff, 0xfe]), 0, geometry({ pixelRepresentation: 1 }), true);
    expect([...be.pixels]).toEqual([0x0102, -2]);
  });

  it('unpacks 1-bit frames across byte boundaries, least significant bit first', () => {
    const g = geometry({ columns: 3, bitsAllocated: 1, bitsStored: 1, highBit: 0 });
    const data = Uint8Array.from([0b00101101]);
    expect([...decodeNative(data, 0, g, false).pixels]).toEqual([1, 0, 1]);
    expect([...decodeNative(data, 1, g, false).pixels]).toEqual([1, 0, 1]);
  });

  it('upsamples YBR_FULL_422 to YBR_FULL', () => {
    const g = geometry({ samplesPerPixel: 3, bitsAllocated: 8, bitsStored: 8, highBit: 7, photometricInterpretation: 'YBR_FULL_422' });
    const d = decodeNative(Uint8Array.from([10, 20, 128, 129]), 0, g, false);
    expect(d.photometricInterpretation).toBe('YBR_FULL');
    expect([...d.pixels]).toEqual([10, 128, 129, 20, 128, 129]);
  });
});

describe('modality pipeline', () => {
  it('converts YBR_FULL to RGB (C.7.6.3.1.2)', () => {
    expect([...ybrFullToRgb(Uint8Array.from([128, 128, 128, 76, 85, 255, 0, 128, 128]), 8)]).toEqual([128, 128, 128, 254, 0, 0, 0, 0, 0]);
  });

  it('rescales to Int32 for integer slope/intercept, Float32 otherwise', () => {
    const hu = applyRescale(Int16Array.from([0, 1024]), 1, -1024);
    expect(hu).toBeInstanceOf(Int32Array);
    expect([...hu]).toEqual([-1024, 0]);
    expect(applyRescale(Uint16Array.from([3]), 0.5, 0)).toBeInstanceOf(Float32Array);
  });

  it('follows the linear VOI function of C.11.2.1.2.1', () => {
    // c=40, w=80: x <= -0.5 -> 0, x > 79.5 -> 255, centre maps to the middle.
    expect([...windowTo8Bit([-1000, -0.5, 39.5, 79.5, 80], { center: 40, width: 80 })]).toEqual([0, 0, 128, 255, 255]);
    expect([...windowTo8Bit([-1000, 1000], { center: 40, width: 80 }, { invert: true })]).toEqual([255, 0]);
    // width 1 is a threshold at the centre.
    expect([...windowTo8Bit([9, 10], { center: 10, width: 1 })]).toEqual([0, 255]);
  });

  it('builds window options: file first, CT presets, MR percentiles', () => {
    const ct = windowOptions('CT', { windowCenter: [50], windowWidth: [350] }, []);
    expect(ct.map((w) => w.id)).toEqual(['file', 'brain', 'subdural', 'lung', 'bone', 'soft-tissue']);
    const values = Float32Array.from({ length: 1000 }, (_, i) => i);
    const mr = windowOptions('MR', { windowCenter: [], windowWidth: [] }, values);
    expect(mr).toHaveLength(1);
    expect(mr[0]?.center).toBeCloseTo(499.5, 0);
    expect(mr[0]?.width).toBeCloseTo(980, -1);
  });

  it('draws a flat frame black, not white (issue 11: an all-zero frame had window 1 / level 0)', () => {
    for (const value of [0, 37, -1024]) {
      const flat = new Float32Array(64).fill(value);
      const [auto] = windowOptions('MR', { windowCenter: [], windowWidth: [] }, flat);
      expect([...new Set(windowTo8Bit(flat, auto!))]).toEqual([0]);
    }
    // One hot pixel on a blank frame stays visible.
    const blank = new Float32Array(1000);
    blank[500] = 4000;
    const [auto] = windowOptions('MR', { windowCenter: [], windowWidth: [] }, blank);
    expect(windowTo8Bit(blank, auto!)[0]).toBe(0);
    expect(windowTo8Bit(blank, auto!)[500]).toBe(255);
  });
});

describe('UIDs and text', () => {
  it('accepts valid UIDs, strips padding, tolerates leading zeros', () => {
    expect(parseUid('1.2.840.10008.1.2\0')).toEqual({ ok: true, uid: '1.2.840.10008.1.2' });
    const lenient = parseUid('1.2.03.4');
    expect(lenient.ok).toBe(true);
    if (lenient.ok) expect(isStrictUid(lenient.uid)).toBe(false);
    expect(parseUid('1.2.abc').ok).toBe(false);
    expect(parseUid('1..2').ok).toBe(false);
    expect(parseUid(`1.${'2'.repeat(64)}`).ok).toBe(false);
  });

  it('decodes names under ISO_IR 100, ISO_IR 192 and the default repertoire', () => {
    expect(decodeText(Uint8Array.from([0x4d, 0xfc, 0x6c, 0x6c, 0x65, 0x72]), 'ISO_IR 100')).toBe('Müller');
    expect(decodeText(new TextEncoder().encode('Wang^XiaoDong=王^小東'), 'ISO_IR 192')).toBe('Wang^XiaoDong=王^小東');
    expect(decodeText(Uint8Array.from([0x41, 0x42]), undefined)).toBe('AB');
    expect(decodeText(Uint8Array.from([0xc4, 0xe5]), 'ISO_IR 144')).toBe('Фх');
  });
});

describe('error reasons', () => {
  it('rejects non-DICOM and empty input plainly', () => {
    expect(parseDicom(new Uint8Array(0))).toEqual({ ok: false, reason: 'not a DICOM file' });
    expect(parseDicom(new TextEncoder().encode('hello, this is not dicom at all'))).toEqual({ ok: false, reason: 'not a DICOM file' });
  });

  it('names an unknown transfer syntax, and says when the data set is empty', () => {
    const el = (g: number, e: number, vr: string, value: string): number[] => [g & 0xff, g >> 8, e & 0xff, e >> 8, vr.charCodeAt(0), vr.charCodeAt(1), value.length & 0xff, value.length >> 8, ...[...value].map((c) => c.charCodeAt(0))];
    const part10 = (ts: string): Uint8Array => Uint8Array.from([...new Array<number>(128).fill(0), 0x44, 0x49, 0x43, 0x4d, ...el(2, 0x10, 'UI', ts)]);
    expect(parseDicom(part10('1.2.3.4\0'))).toEqual({ ok: false, reason: 'unsupported transfer syntax 1.2.3.4 (unknown)' });
    // MPEG2 is known, so the data set is read; there is none here.
    expect(parseDicom(part10('1.2.840.10008.1.2.4.100\0'))).toEqual({ ok: false, reason: 'empty data set' });
  });

  it('refuses to decode frames out of range or without pixel data', async () => {
    const { readFileSync } = await import('node:fs');
    const bytes = new Uint8Array(readFileSync('/usr/lib/python3/dist-packages/pydicom/data/test_files/rtplan.dcm'));
    const parsed = parseDicom(bytes);
    if (!parsed.ok) throw new Error(parsed.reason);
    await expect(decodeFrame(bytes, parsed.instance, 0)).rejects.toThrow('no pixel data');
  });
});
