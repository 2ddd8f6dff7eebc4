/**
 * The intake log on a real folder: what was appended is read back whole and in order, a torn
 * tail ends the reading without taking the records before it, lengths in a damaged header are
 * never trusted, and a segment goes once what it holds is indexed.
 */
import { createHash } from 'node:crypto';
import { appendFileSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { abandonedSegments, hostNamePart, INTAKE_DIR, openIntakeLog, parseSegmentName, readIntakeSegment, type IntakeLog, type IntakeRecord } from '#server/imports/intake-log.ts';

let dataDir: string;
const errors: string[] = [];
const meta = { callingAeTitle: 'CT01', host: '10.0.0.5', receivedAt: '2026-11-26T10:00:00.000Z' };
const digest = (bytes: Buffer): string => createHash('sha256').update(bytes).digest('hex');
const payload = (n: number, size = 3000): Buffer => Buffer.alloc(size, n % 251);

function segmentsIn(): string[] {
  try {
    return readdirSync(join(dataDir, INTAKE_DIR)).sort();
  } catch {
    return [];
  }
}

async function readAll(path: string): Promise<{ records: IntakeRecord[]; tornBytes: number; why: string | null }> {
  const records: IntakeRecord[] = [];
  const end = await readIntakeSegment(path, (r) => {
    records.push(r);
    return Promise.resolve();
  });
  return { records, tornBytes: end.tornBytes, why: end.why };
}

/** A segment as a process that is gone left it: this process's log closed with records pending, renamed to a pid no process has. */
async function deadSegmentWith(payloads: Buffer[]): Promise<string> {
  const log = openIntakeLog(dataDir, (what) => errors.push(what));
  for (const p of payloads) await log.append(meta, p, digest(p));
  await log.close();
  const [name] = segmentsIn();
  const parsed = parseSegmentName(name ?? '');
  if (!parsed) throw new Error('no segment written');
  const dead = join(dataDir, INTAKE_DIR, `${2 ** 22 + 12345}.1.1.${hostNamePart(parsed.host)}.log`);
  renameSync(join(dataDir, INTAKE_DIR, name ?? ''), dead);
  return dead;
}

let log: IntakeLog | undefined;

beforeEach(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'mia-intake-'));
  errors.length = 0;
});

afterEach(async () => {
  await log?.close();
  log = undefined;
  rmSync(dataDir, { recursive: true, force: true });
});

describe('intake log', () => {
  it('reads back every appended record whole, in order, with who sent it', async () => {
    const payloads = [payload(1), payload(2, 40_000), payload(3, 1)];
    const path = await deadSegmentWith(payloads);
    const { records, tornBytes } = await readAll(path);
    expect(tornBytes).toBe(0);
    expect(records.map((r) => r.bytes.equals(payloads[records.indexOf(r)] ?? Buffer.alloc(0)))).toEqual([true, true, true]);
    expect(records.map((r) => r.sha256)).toEqual(payloads.map(digest));
    expect(records[0]?.meta).toEqual(meta);
  });

  it('groups appends made together and answers each', async () => {
    log = openIntakeLog(dataDir, (what) => errors.push(what));
    const appended = await Promise.all(Array.from({ length: 100 }, (_, i) => log!.append(meta, payload(i), digest(payload(i)))));
    expect(appended).toHaveLength(100);
    expect(log.outstanding()).toBe(100);
    const [name] = segmentsIn();
    const { records } = await readAll(join(dataDir, INTAKE_DIR, name ?? ''));
    expect(records.map((r) => r.bytes[0])).toEqual(Array.from({ length: 100 }, (_, i) => i % 251));
  });

  it('empties its segment once every record is released, and removes it at close', async () => {
    log = openIntakeLog(dataDir, (what) => errors.push(what));
    const a = await log.append(meta, payload(1), digest(payload(1)));
    const b = await log.append(meta, payload(2), digest(payload(2)));
    const path = join(dataDir, INTAKE_DIR, segmentsIn()[0] ?? '');
    a.release();
    a.release();
    expect(log.outstanding()).toBe(1);
    expect(statSync(path).size).toBeGreaterThan(6000);
    b.release();
    await expect.poll(() => statSync(path).size).toBe(0);
    await log.close();
    log = undefined;
    expect(segmentsIn()).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('keeps at close a segment whose records are not indexed, and another start finds it abandoned', async () => {
    log = openIntakeLog(dataDir, (what) => errors.push(what));
    await log.append(meta, payload(7), digest(payload(7)));
    const [name] = segmentsIn();
    // Open: its writer is alive.
    expect(await abandonedSegments(dataDir)).toEqual([]);
    await log.close();
    log = undefined;
    expect(await abandonedSegments(dataDir)).toEqual([join(dataDir, INTAKE_DIR, name ?? '')]);
  });

  it('stops at a torn tail and keeps the records before it', async () => {
    const path = await deadSegmentWith([payload(1), payload(2)]);
    const whole = statSync(path).size;
    // The second record's append cut short by a power cut.
    truncateSync(path, whole - 1000);
    const cut = await readAll(path);
    expect(cut.records).toHaveLength(1);
    expect(cut.tornBytes).toBeGreaterThan(0);
    expect(cut.why).toMatch(/cut short/);
  });

  it('refuses a record whose bytes do not match its digest, and lengths larger than any record', async () => {
    const path = await deadSegmentWith([payload(1), payload(2)]);
    const bytes = readFileSync(path);
    const second = bytes.indexOf(Buffer.from('MIAINTK1'), 10);
    // A flipped byte in the second record's data.
    const flipped = Buffer.from(bytes);
    flipped[flipped.length - 10] = (flipped[flipped.length - 10] ?? 0) ^ 0xff;
    writeFileSync(path, flipped);
    expect((await readAll(path)).records).toHaveLength(1);
    expect((await readAll(path)).why).toMatch(/digest/);
    // A data length of 4 GiB - 1 in the second header: refused before anything is allocated.
    const huge = Buffer.from(bytes);
    huge.writeUInt32LE(0xffffffff, second + 12);
    writeFileSync(path, huge);
    const read = await readAll(path);
    expect(read.records).toHaveLength(1);
    expect(read.why).toMatch(/larger than allowed/);
    // Garbage after the last record.
    writeFileSync(path, bytes);
    appendFileSync(path, Buffer.from('not a record at all, just bytes'));
    const garbage = await readAll(path);
    expect(garbage.records).toHaveLength(2);
    expect(garbage.tornBytes).toBe(31);
  });

  it('names segments so that only its own host reads them back', async () => {
    expect(parseSegmentName(`123.4.5.${hostNamePart('ws-7.radiology.example')}.log`)).toEqual({ pid: 123, instance: 4, seq: 5, host: 'ws-7.radiology.example' });
    expect(parseSegmentName('notes.txt')).toBeNull();
    const dir = join(dataDir, INTAKE_DIR);
    const own = await deadSegmentWith([payload(1)]);
    writeFileSync(join(dir, `${2 ** 22 + 1}.1.1.${hostNamePart('another-host.example')}.log`), payload(1));
    expect(await abandonedSegments(dataDir)).toEqual([own]);
  });
});
