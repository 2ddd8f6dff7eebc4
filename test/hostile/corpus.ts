/**
 * The hostile corpus: files made to take a DICOM server down (absurd frame counts, lengths and
 * dimensions, deflate bombs, deep sequences, 200k private elements, lying encapsulated
 * fragments) and seeded truncations and bit flips of pydicom's real files. Each is generated
 * here, small on disk, so the suite needs nothing but this code and Debian's pydicom.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { seededRandom } from '../helpers/random.ts';
import {
  EXPLICIT_LE,
  RLE,
  bytesEl,
  concat,
  ctDataSet,
  deepSequence,
  deflateWithZeros,
  deflatedPart10,
  encapsulated,
  encode,
  part10,
  str,
  type El,
} from './dicom-writer.ts';

export type HostileFile = {
  name: string;
  bytes: Uint8Array;
  /** What a correct server says of it. */
  expect: 'rejected' | 'either';
  /** The series it would create if stored (crafted files only). */
  seriesUid?: string;
};

const MiB = 1024 * 1024;
export const PYDICOM_CORPUS = '/usr/lib/python3/dist-packages/pydicom/data/test_files';

function image(uid: string, over: Partial<Parameters<typeof ctDataSet>[0]> = {}, syntax = EXPLICIT_LE): Uint8Array {
  return part10(encode(ctDataSet({ rows: 64, columns: 64, uid, ...over })), syntax, `${uid}.3`);
}

/** A deflated 64x64 CT whose inflated data set holds `zeros` bytes of zeros in a private OB. */
function deflateBomb(uid: string, zeros: number, where: 'before-pixels' | 'after-pixels' | 'pixels'): Uint8Array {
  if (where === 'pixels') {
    // Attributes that agree with the pixel data: a 16384 x 16384 x 16-bit frame is 512 MiB.
    const side = Math.round(Math.sqrt(zeros / 2));
    const elements = ctDataSet({ rows: side, columns: side, uid, pixelData: null });
    const head = concat([encode(elements), pixelHeader(zeros)]);
    return deflatedPart10(deflateWithZeros(head, zeros, new Uint8Array(0)), `${uid}.3`);
  }
  const elements = ctDataSet({ rows: 64, columns: 64, uid });
  const pixelIndex = elements.findIndex((e) => e.tag === 0x7fe00010);
  const beforePixels = elements.slice(0, pixelIndex);
  const pixels = elements.slice(pixelIndex);
  if (where === 'before-pixels') {
    const head = concat([encode(beforePixels), obHeader(0x00291010, zeros)]);
    return deflatedPart10(deflateWithZeros(head, zeros, encode(pixels)), `${uid}.3`);
  }
  const head = concat([encode(elements), obHeader(0x7fe11010, zeros)]);
  return deflatedPart10(deflateWithZeros(head, zeros, new Uint8Array(0)), `${uid}.3`);
}

function obHeader(tag: number, length: number): Uint8Array {
  const out = new Uint8Array(12);
  const v = new DataView(out.buffer);
  v.setUint16(0, tag >>> 16, true);
  v.setUint16(2, tag & 0xffff, true);
  out.set([0x4f, 0x42], 4);
  v.setUint32(8, length, true);
  return out;
}

const pixelHeader = (length: number): Uint8Array => {
  const h = obHeader(0x7fe00010, length);
  h.set([0x4f, 0x57], 4);
  return h;
};

function manyPrivateElements(uid: string, count: number): Uint8Array {
  const extra: El[] = [str(0x00290010, 'LO', 'HOSTILE')];
  for (let i = 0; i < count; i++) {
    // 200k elements cannot all have distinct tags in one private block: spread them over groups.
    const group = 0x0029 + 2 * Math.floor(i / 0xff00);
    const element = 0x1000 + (i % 0xff00);
    extra.push(bytesEl(((group << 16) | element) >>> 0, 'OB', Uint8Array.from([i & 0xff, 0])));
  }
  return image(uid, { extra });
}

function realCorpus(): Uint8Array[] {
  return readdirSync(PYDICOM_CORPUS)
    .filter((f) => f.endsWith('.dcm'))
    .sort()
    .map((f) => new Uint8Array(readFileSync(join(PYDICOM_CORPUS, f))))
    .filter((b) => b.length <= 600_000);
}

/** Seeded truncations and bit flips of the real corpus. */
export function mutants(count: number, seed: number): HostileFile[] {
  const sources = realCorpus();
  const rand = seededRandom(seed);
  const pick = (n: number): number => Math.floor(rand() * n);
  return Array.from({ length: count }, (_, i) => {
    const src = sources[pick(sources.length)] ?? new Uint8Array(0);
    if (i % 2 === 0) return { name: `truncated-${i}`, bytes: src.slice(0, pick(src.length)), expect: 'either' };
    const out = src.slice();
    for (let n = 0, flips = 1 + pick(16); n < flips; n++) {
      const at = pick(out.length);
      out[at] = (out[at] ?? 0) ^ (1 << pick(8));
    }
    return { name: `bitflip-${i}`, bytes: out, expect: 'either' };
  });
}

/** The crafted inputs, each one a way a real server has been taken down. */
export function craftedFiles(): HostileFile[] {
  const rleFragment = new Uint8Array(64 + 16);
  const files: HostileFile[] = [
    { name: 'frames-2e9', bytes: image('1.2.826.0.1.3680043.10.1.1', { frames: '2000000000' }), expect: 'rejected' },
    { name: 'frames-negative', bytes: image('1.2.826.0.1.3680043.10.1.2', { frames: '-5' }), expect: 'either' },
    { name: 'frames-65536-short-pixels', bytes: image('1.2.826.0.1.3680043.10.1.3', { frames: '65536' }), expect: 'rejected' },
    { name: 'rows-columns-65535', bytes: image('1.2.826.0.1.3680043.10.1.4', { rows: 65535, columns: 65535, pixelData: bytesEl(0x7fe00010, 'OW', new Uint8Array(8192)) }), expect: 'rejected' },
    {
      name: 'encapsulated-1000-frames-2-fragments',
      bytes: image('1.2.826.0.1.3680043.10.1.5', { frames: '1000', pixelData: encapsulated([rleFragment, rleFragment]) }, RLE),
      expect: 'rejected',
    },
    {
      name: 'encapsulated-fragment-length-lies',
      bytes: (() => {
        const file = image('1.2.826.0.1.3680043.10.1.6', { pixelData: encapsulated([rleFragment]) }, RLE);
        // The fragment's item length (after the empty offset table's item) claims 2 GiB.
        const at = file.length - 8 - rleFragment.length - 4;
        new DataView(file.buffer).setUint32(at, 0x7ffffff0, true);
        return file;
      })(),
      expect: 'rejected',
    },
    { name: 'element-length-4GiB', bytes: (() => {
      const file = image('1.2.826.0.1.3680043.10.1.7');
      // Pixel Data's 32-bit length says 0xFFFFFFF0.
      new DataView(file.buffer).setUint32(file.length - 64 * 64 * 2 - 4, 0xfffffff0, true);
      return file;
    })(), expect: 'rejected' },
    { name: 'deep-sequence-20000', bytes: image('1.2.826.0.1.3680043.10.1.8', { extra: [deepSequence(0x00291020, 20_000)] }), expect: 'either' },
    { name: 'private-elements-200k', bytes: manyPrivateElements('1.2.826.0.1.3680043.10.1.9', 200_000), expect: 'either' },
    { name: 'deflate-bomb-512MiB-trailer', bytes: deflateBomb('1.2.826.0.1.3680043.10.1.10', 512 * MiB, 'after-pixels'), expect: 'rejected' },
    { name: 'deflate-bomb-512MiB-header', bytes: deflateBomb('1.2.826.0.1.3680043.10.1.11', 512 * MiB, 'before-pixels'), expect: 'rejected' },
    { name: 'deflate-bomb-512MiB-pixels', bytes: deflateBomb('1.2.826.0.1.3680043.10.1.12', 512 * MiB, 'pixels'), expect: 'rejected' },
    { name: 'deflate-bomb-4GiB', bytes: deflateBomb('1.2.826.0.1.3680043.10.1.13', 4095 * MiB, 'after-pixels'), expect: 'rejected' },
    { name: 'deflate-garbage', bytes: deflatedPart10(Uint8Array.from({ length: 4096 }, (_, i) => (i * 7919) & 0xff), '1.2.826.0.1.3680043.10.1.14.3'), expect: 'rejected' },
  ];
  // The UIDs above are numbered in list order.
  return files.map((f, i) => ({ ...f, seriesUid: `1.2.826.0.1.3680043.10.1.${i + 1}.2` }));
}
