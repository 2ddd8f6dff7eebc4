/**
 * Mutated copies of the corpus (truncations, flipped bytes, absurd element lengths) from a
 * seeded PRNG: parseDicom never throws, decodeFrame only ever rejects with an Error that has a
 * message, nothing hangs, and every rejection says why.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parseDicom } from '#server/dicom/parse.ts';
import { decodeFrame } from '#server/dicom/pixels.ts';
import { corpusFiles } from './helpers/reference.ts';
import { seededRandom } from '../helpers/random.ts';


const MAX_BYTES = 600_000; // keep big images out so the run stays short on 2 cores
const PER_FILE_MS = 2_000;
const MUTANTS = 8_000;

function mutate(src: Uint8Array, rand: () => number): Uint8Array {
  const pick = (n: number): number => Math.floor(rand() * n);
  const kind = pick(4);
  if (kind === 0) return src.slice(0, pick(src.length));
  const out = src.slice();
  if (kind === 1) {
    for (let i = 0, n = 1 + pick(8); i < n; i++) out[pick(out.length)] = pick(256);
  } else if (kind === 2) {
    // Absurd length: overwrite 4 bytes at a plausible element length position with a huge value.
    const at = pick(Math.max(1, out.length - 4));
    const v = [0xffffffff, 0x7fffffff, 0xfffffffe, out.length * 2, 0][pick(5)] ?? 0;
    out[at] = v & 0xff;
    out[at + 1] = (v >>> 8) & 0xff;
    out[at + 2] = (v >>> 16) & 0xff;
    out[at + 3] = (v >>> 24) & 0xff;
  } else {
    // Damage the pixel data region specifically (end of file) so codecs see bad streams.
    const start = Math.floor(out.length * 0.6);
    for (let i = 0, n = 1 + pick(32); i < n; i++) out[start + pick(out.length - start)] = pick(256);
  }
  return out;
}

describe('fuzz', () => {
  it(`${MUTANTS} mutants never throw, hang or reject silently`, { timeout: 120_000 }, async () => {
    const sources = corpusFiles()
      .map((f) => new Uint8Array(readFileSync(f)))
      .filter((b) => b.length <= MAX_BYTES && parseDicom(b).ok);
    expect(sources.length).toBeGreaterThan(40);
    const rand = seededRandom(20240611);
    const stats = { accepted: 0, rejected: 0, decoded: 0, decodeErrors: 0 };
    for (let m = 0; m < MUTANTS; m++) {
      const src = sources[Math.floor(rand() * sources.length)];
      if (!src) continue;
      const bytes = mutate(src, rand);
      const started = Date.now();
      const result = parseDicom(bytes);
      if (!result.ok) {
        stats.rejected++;
        expect(result.reason.trim().length, `mutant ${m}`).toBeGreaterThan(0);
        continue;
      }
      stats.accepted++;
      if (result.instance.hasPixelData) {
        try {
          await decodeFrame(bytes, result.instance, 0);
          stats.decoded++;
        } catch (err) {
          stats.decodeErrors++;
          expect(err, `mutant ${m}`).toBeInstanceOf(Error);
          expect((err as Error).message.length, `mutant ${m}`).toBeGreaterThan(0);
        }
      }
      expect(Date.now() - started, `mutant ${m} took too long`).toBeLessThan(PER_FILE_MS);
    }
    expect(stats.rejected).toBeGreaterThan(100);
    expect(stats.decoded).toBeGreaterThan(100);
  });
});
