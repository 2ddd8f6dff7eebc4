/**
 * Intake log segments damaged every way a disk or a person could (server/imports/intake-log.ts):
 * a start reads them back without throwing and gives back only records that are whole and were
 * written (a stretch copied from an earlier record can repeat one: imported again, it is a
 * duplicate), stopping where the damage is. The segment is a real one,
 * written in place by the log, then mutated by a seeded generator so a failure can be replayed.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INTAKE_DIR, openIntakeLog, readIntakeSegment } from '#server/imports/intake-log.ts';
import { seededRandom } from '../helpers/random.ts';

const meta = { callingAeTitle: 'CT01', host: '10.0.0.5', receivedAt: '2026-11-26T10:00:00.000Z' };
const digest = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
/** Records of different sizes and contents, as instances are. */
const payloads = Array.from({ length: 12 }, (_, i) => Buffer.alloc(500 + i * 997, (i * 37 + 11) % 251));
const META_BYTES = Buffer.byteLength(JSON.stringify(meta));

let dir: string;
/** The bytes of the segment up to a little past its last record (the rest is zero fill). */
let segment: Buffer;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-intake-hostile-'));
  const log = openIntakeLog(dir, () => undefined);
  for (const p of payloads) await log.append(meta, p, digest(p));
  // Closed with every record outstanding: kept, as a crash would leave it.
  await log.close();
  const [name] = readdirSync(join(dir, INTAKE_DIR));
  const whole = readFileSync(join(dir, INTAKE_DIR, name ?? ''));
  const used = 64 + payloads.reduce((sum, p) => sum + 56 + META_BYTES + p.length, 0);
  segment = whole.subarray(0, used + 4096);
});

afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** One way of damaging a segment, chosen and placed by the generator. */
function mutate(bytes: Buffer, random: () => number): Buffer {
  const out = Buffer.from(bytes);
  const at = (): number => Math.floor(random() * out.length);
  switch (Math.floor(random() * 6)) {
    case 0: // bytes flipped here and there
      for (let n = 1 + Math.floor(random() * 8); n > 0; n -= 1) {
        const i = at();
        out[i] = (out[i] ?? 0) ^ (1 + Math.floor(random() * 255));
      }
      return out;
    case 1: // cut anywhere
      return out.subarray(0, at());
    case 2: // a run zeroed (a write that never reached the disk)
    {
      const start = at();
      return out.fill(0, start, Math.min(out.length, start + Math.floor(random() * 70_000)));
    }
    case 3: // a length field set to something huge or odd
    {
      const i = at() & ~3;
      if (i + 4 <= out.length) out.writeUInt32LE([0xffffffff, 0x7fffffff, 0x10000000, Math.floor(random() * 2 ** 32)][Math.floor(random() * 4)]!, i);
      return out;
    }
    case 4: // a stretch copied over another (an earlier record's bytes where a later one was)
    {
      const from = at();
      const to = at();
      out.copy(out, to, from, Math.min(out.length, from + Math.floor(random() * 20_000)));
      return out;
    }
    default: // random bytes appended where the zero fill was
      return Buffer.concat([out, Buffer.from(Array.from({ length: Math.floor(random() * 300) }, () => Math.floor(random() * 256)))]);
  }
}

describe('intake segments, damaged', () => {
  it('reads every damaged segment back without throwing, giving only whole records that were written', async () => {
    const path = join(dir, INTAKE_DIR, 'damaged.log');
    const originals = payloads.map((p) => p.toString('base64'));
    for (let seed = 1; seed <= 600; seed += 1) {
      const random = seededRandom(seed);
      let damaged = segment;
      for (let n = 1 + Math.floor(random() * 3); n > 0; n -= 1) damaged = mutate(damaged, random);
      writeFileSync(path, damaged);
      const read: string[] = [];
      const end = await readIntakeSegment(path, (record) => {
        expect(digest(record.bytes), `seed ${seed}`).toBe(record.sha256);
        read.push(record.bytes.toString('base64'));
        return Promise.resolve();
      });
      // Only what was written; up to the first damaged byte, exactly what was written there.
      for (const record of read) expect(originals, `seed ${seed}`).toContain(record);
      const firstDamage = damaged.findIndex((b, i) => b !== segment[i]);
      const intact = payloads.filter((_, k) => 64 + payloads.slice(0, k + 1).reduce((sum, p) => sum + 56 + META_BYTES + p.length, 0) <= (firstDamage < 0 ? damaged.length : firstDamage));
      expect(read.slice(0, intact.length), `seed ${seed}`).toEqual(originals.slice(0, Math.min(intact.length, read.length)));
      expect(read.length, `seed ${seed}`).toBeGreaterThanOrEqual(intact.length);
      expect(end.records, `seed ${seed}`).toBe(read.length);
      expect(end.tornBytes, `seed ${seed}`).toBeGreaterThanOrEqual(0);
      expect(end.tornBytes, `seed ${seed}`).toBeLessThanOrEqual(damaged.length);
    }
  });

  it('reads the undamaged segment whole', async () => {
    const path = join(dir, INTAKE_DIR, 'whole.log');
    writeFileSync(path, segment);
    const read: Buffer[] = [];
    const end = await readIntakeSegment(path, (record) => {
      read.push(record.bytes);
      return Promise.resolve();
    });
    expect(read.map((b) => b.equals(payloads[read.indexOf(b)]!))).toEqual(payloads.map(() => true));
    expect(end).toEqual({ records: payloads.length, tornBytes: 0, why: null });
  });
});
