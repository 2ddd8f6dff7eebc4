/**
 * The import edge against the hostile corpus, in process: every crafted file is refused with a
 * reason that names what is wrong, deflate bombs are stopped at their cap without stalling the
 * event loop or holding gigabytes, and the real deflated file still reads.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseDicom, readDicom } from '#server/dicom/parse.ts';
import { decodeFrame } from '#server/dicom/pixels.ts';
import { craftedFiles, mutants, PYDICOM_CORPUS } from './corpus.ts';

const crafted = craftedFiles();
const byName = (name: string): Uint8Array => {
  const file = crafted.find((f) => f.name === name);
  if (!file) throw new Error(`no crafted file ${name}`);
  return file.bytes;
};

/** Runs `work` while measuring the event loop's worst delay and the growth of resident memory. */
async function measured<T>(work: () => Promise<T>): Promise<{ value: T; lagMs: number; rssGrowthMiB: number }> {
  const rssBefore = process.memoryUsage().rss;
  let peakRss = rssBefore;
  let lagMs = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    lagMs = Math.max(lagMs, now - last - 5);
    last = now;
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
  }, 5);
  try {
    const value = await work();
    peakRss = Math.max(peakRss, process.memoryUsage().rss);
    return { value, lagMs, rssGrowthMiB: (peakRss - rssBefore) / 1024 / 1024 };
  } finally {
    clearInterval(timer);
  }
}

describe('crafted files are refused with the reason', () => {
  it.each([
    ['frames-2e9', /Pixel Data holds 8192 bytes but 2000000000 frame\(s\) of 64 x 64/],
    ['frames-65536-short-pixels', /65536 frame\(s\)/],
    ['rows-columns-65535', /65535 x 65535 x 1 samples is larger than/],
    ['encapsulated-1000-frames-2-fragments', /Number of Frames \(0028,0008\) is 1000 but the encapsulated Pixel Data has only 2 fragment/],
    ['encapsulated-fragment-length-lies', /\(7FE0,0010\)/],
    ['element-length-4GiB', /\(7FE0,0010\) at offset \d+ declares 4294967280 bytes/],
    ['deflate-garbage', /deflated data set does not inflate/],
  ])('%s', async (name, reason) => {
    const result = await readDicom(byName(name));
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.reason).toMatch(reason);
    // The synchronous parser agrees wherever no inflating is involved.
    if (!name.startsWith('deflate')) expect(parseDicom(byName(name))).toEqual(result);
  });

  it('a sequence nested 20,000 deep is refused as such, not with a stack trace', async () => {
    const result = await readDicom(byName('deep-sequence-20000'));
    expect(result).toEqual({ ok: false, reason: expect.stringMatching(/\(0029,1020\) at offset \d+ nests sequences too deeply/) });
  });

  it('200,000 private elements parse (they are legal) in bounded time and memory', async () => {
    const { value, rssGrowthMiB } = await measured(() => readDicom(byName('private-elements-200k')));
    expect(value.ok).toBe(true);
    expect(rssGrowthMiB).toBeLessThan(400);
  });
});

describe('deflate bombs', () => {
  it.each([
    ['deflate-bomb-512MiB-trailer', /inflates past its Pixel Data \(\d+ KiB declared\) by more than 1 MiB/],
    ['deflate-bomb-512MiB-header', /more than 32 MiB before any Pixel Data/],
    ['deflate-bomb-512MiB-pixels', /inflates to more than 256 MiB, the most mia inflates/],
    ['deflate-bomb-4GiB', /inflates past its Pixel Data/],
  ])('%s is stopped at its cap, off the event loop', async (name, reason) => {
    const bytes = byName(name);
    expect(bytes.length).toBeLessThan(5 * 1024 * 1024);
    const { value, lagMs, rssGrowthMiB } = await measured(() => readDicom(bytes));
    expect(value).toEqual({ ok: false, reason: expect.stringMatching(reason) });
    // Before: one synchronous inflate of 512 MiB (seconds of stall, gigabytes held) or a crash.
    expect(lagMs).toBeLessThan(1000);
    expect(rssGrowthMiB).toBeLessThan(600);
  });

  it("pydicom's real deflated file reads through the capped path and decodes as before", async () => {
    const bytes = new Uint8Array(readFileSync(join(PYDICOM_CORPUS, 'image_dfl.dcm')));
    const viaAsync = await readDicom(bytes);
    const copy = bytes.slice();
    const viaSync = parseDicom(copy);
    expect(viaAsync.ok && viaSync.ok).toBe(true);
    if (!viaAsync.ok || !viaSync.ok) return;
    expect(viaAsync.instance).toEqual(viaSync.instance);
    const a = await decodeFrame(bytes, viaAsync.instance, 0);
    const b = await decodeFrame(copy, viaSync.instance, 0);
    expect(Buffer.from(a.pixels.buffer, a.pixels.byteOffset, a.pixels.byteLength).equals(Buffer.from(b.pixels.buffer, b.pixels.byteOffset, b.pixels.byteLength))).toBe(true);
  });
});

describe('truncations and bit flips of the real corpus', () => {
  it('never throw; every refusal says why; accepted ones back their frame counts', async () => {
    for (const file of mutants(600, 20261123)) {
      const result = await readDicom(file.bytes);
      if (!result.ok) {
        expect(result.reason.length, file.name).toBeGreaterThan(5);
        continue;
      }
      const i = result.instance;
      if (i.pixelData && !i.pixelData.encapsulated) {
        expect(i.numberOfFrames * i.rows * i.columns * i.samplesPerPixel * Math.max(1, i.bitsAllocated / 8), file.name).toBeLessThanOrEqual(
          Math.max(i.pixelData.length, 1) * 8,
        );
      }
    }
  });
});

describe('compressed frames whose own header disagrees with the attributes', () => {
  it('are refused before any codec sizes a buffer from them', async () => {
    // A real JPEG-LS frame (MR_small, 64x64) whose SOF55 is edited to claim 65535 x 65535.
    const bytes = new Uint8Array(readFileSync(join(PYDICOM_CORPUS, 'MR_small_jpeg_ls_lossless.dcm')));
    const parsed = await readDicom(bytes);
    if (!parsed.ok || !parsed.instance.pixelData?.encapsulated) throw new Error('fixture did not parse as encapsulated');
    const fragment = parsed.instance.pixelData.fragments[0];
    if (!fragment) throw new Error('no fragment');
    let sof = -1;
    for (let i = fragment.offset; i < fragment.offset + fragment.length - 1; i++) {
      if (bytes[i] === 0xff && bytes[i + 1] === 0xf7) {
        sof = i;
        break;
      }
    }
    expect(sof).toBeGreaterThan(0);
    bytes.set([0xff, 0xff, 0xff, 0xff], sof + 5);
    await expect(decodeFrame(bytes, parsed.instance, 0)).rejects.toThrow(/codestream is 65535x65535, DICOM says 64x64/);
  });
});
