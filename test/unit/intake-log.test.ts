/**
 * The intake log on a real folder: what was appended is read back whole and in order, a torn
 * tail ends the reading without taking the records before it, lengths in a damaged header are
 * never trusted, a segment is emptied once what it holds is indexed, and a segment written again
 * never gives back the records of its earlier use.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { abandonedSegments, hostNamePart, INTAKE_DIR, openIntakeLog, parseSegmentName, readIntakeSegment, removeAbandonedSpares, type IntakeLog, type IntakeRecord } from '#server/imports/intake-log.ts';

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

/** Where each record header of a segment file starts, and where the last record ends. */
function recordSpans(bytes: Buffer): { starts: number[]; end: number } {
  const starts: number[] = [];
  for (let at = bytes.indexOf('MIAINTK2'); at >= 0; at = bytes.indexOf('MIAINTK2', at + 1)) starts.push(at);
  const last = starts.at(-1) ?? 0;
  const end = last + 56 + bytes.readUInt32LE(last + 16) + bytes.readUInt32LE(last + 20);
  return { starts, end };
}

let log: IntakeLog | undefined;
const basenameOf = (path: string): string => path.slice(path.lastIndexOf('/') + 1);

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
    expect((await readAll(path)).records).toHaveLength(2);
    b.release();
    // Zeroed where the records were, and still allocated for the next ones.
    await expect.poll(async () => (await readAll(path)).records.length).toBe(0);
    const left = readFileSync(path);
    expect(left.includes(payload(1).subarray(0, 64))).toBe(false);
    expect(left.includes(payload(2).subarray(0, 64))).toBe(false);
    expect(left.length).toBeGreaterThanOrEqual(32 * 1024 * 1024 - 64);
    const c = await log.append(meta, payload(3), digest(payload(3)));
    expect((await readAll(path)).records.map((r) => r.bytes[0])).toEqual([3]);
    c.release();
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
    const bytes = readFileSync(path);
    const { end } = recordSpans(bytes);
    // The second record's append cut short by a power cut: its last 1,000 bytes never written.
    const torn = Buffer.from(bytes);
    torn.fill(0, end - 1000, end);
    writeFileSync(path, torn);
    const cut = await readAll(path);
    expect(cut.records).toHaveLength(1);
    expect(cut.tornBytes).toBeGreaterThan(0);
    expect(cut.why).toMatch(/digest/);
    // The file itself cut inside the record.
    writeFileSync(path, bytes);
    truncateSync(path, end - 1000);
    const short = await readAll(path);
    expect(short.records).toHaveLength(1);
    expect(short.why).toMatch(/cut short/);
  });

  it('reads a segment only up to its own records when written again: the earlier records beyond are not its own', async () => {
    log = openIntakeLog(dataDir, (what) => errors.push(what));
    const mib = (n: number): Buffer => Buffer.alloc(1024 * 1024, n % 251);
    // 31 records of 1 MiB fill a 32 MiB segment; the 32nd starts the second.
    const first = [];
    for (let i = 0; i < 32; i++) first.push(await log.append(meta, mib(i), digest(mib(i))));
    const [oldName] = segmentsIn();
    const inode = statSync(join(dataDir, INTAKE_DIR, oldName ?? '')).ino;
    for (const r of first.slice(0, 31)) r.release();
    // Indexed: kept as a spare, under a name no start reads back.
    await expect.poll(() => segmentsIn().filter((n) => n.endsWith('.spare')).length).toBe(1);
    // The second segment fills; the third is the spare, written again with 3 records only.
    const second = [];
    for (let i = 32; i < 62 + 3; i++) second.push(await log.append(meta, mib(i), digest(mib(i))));
    const reused = segmentsIn().find((n) => n.endsWith('.log') && statSync(join(dataDir, INTAKE_DIR, n)).ino === inode);
    expect(reused).toBeDefined();
    const path = join(dataDir, INTAKE_DIR, reused ?? '');
    // Its 28 earlier records, whole and with valid digests, are still on disk after the new ones.
    expect(readFileSync(path).includes(mib(20).subarray(0, 4096))).toBe(true);
    const read = await readAll(path);
    expect(read.records.map((r) => r.bytes[0])).toEqual([62, 63, 64]);
    expect(read.tornBytes).toBe(0);
    // A start after a crash reads the same: this log, closed with them pending, left them behind.
    first[31]?.release();
    await log.close();
    log = undefined;
    const left = await abandonedSegments(dataDir);
    const recovered: number[] = [];
    for (const segment of left) for (const r of (await readAll(segment)).records) recovered.push(r.bytes[0] ?? -1);
    // The second segment whole (the 32nd record, released, with the rest), then the third's own.
    expect(recovered).toEqual(Array.from({ length: 65 - 31 }, (_, i) => 31 + i));
    expect(errors).toEqual([]);
  }, 30_000);

  it('keeps no spare once nothing waits to be indexed: its patient data would stay idle', async () => {
    log = openIntakeLog(dataDir, (what) => errors.push(what));
    const mib = (n: number): Buffer => Buffer.alloc(1024 * 1024, n % 251);
    const appended = [];
    for (let i = 0; i < 32; i++) appended.push(await log.append(meta, mib(i), digest(mib(i))));
    expect(segmentsIn()).toHaveLength(2);
    for (const r of appended) r.release();
    // The full one removed rather than kept as a spare; the current one zeroed.
    await expect.poll(() => segmentsIn().length).toBe(1);
    expect(segmentsIn().some((n) => n.endsWith('.spare'))).toBe(false);
    await expect.poll(async () => (await readAll(join(dataDir, INTAKE_DIR, segmentsIn()[0] ?? ''))).records.length).toBe(0);
    expect(errors).toEqual([]);
  }, 30_000);

  it('gives a record larger than a segment a segment of its own, and goes on in a zero-filled one', async () => {
    log = openIntakeLog(dataDir, (what) => errors.push(what));
    const big = Buffer.alloc(33 * 1024 * 1024, 9);
    const a = await log.append(meta, big, digest(big));
    const b = await log.append(meta, payload(8), digest(payload(8)));
    const files = segmentsIn().map((n) => join(dataDir, INTAKE_DIR, n));
    expect(files).toHaveLength(2);
    const read = await Promise.all(files.map(readAll));
    expect(read.map((r) => r.records.map((x) => x.bytes.length)).sort()).toEqual([[3000], [big.length]]);
    a.release();
    b.release();
    // The large one's segment goes once indexed; it is not kept as a spare.
    await expect.poll(() => segmentsIn().length).toBe(1);
    expect(errors).toEqual([]);
  }, 30_000);

  it('reads segments written before segments had headers', async () => {
    const dir = join(dataDir, INTAKE_DIR);
    const v1 = (bytes: Buffer): Buffer => {
      const m = Buffer.from(JSON.stringify(meta));
      const header = Buffer.alloc(48);
      header.write('MIAINTK1', 0, 'latin1');
      header.writeUInt32LE(m.length, 8);
      header.writeUInt32LE(bytes.length, 12);
      header.write(digest(bytes), 16, 32, 'hex');
      return Buffer.concat([header, m, bytes]);
    };
    const path = join(dir, `${2 ** 22 + 7}.1.1.${hostNamePart('h')}.log`);
    mkdirSync(dir);
    writeFileSync(path, Buffer.concat([v1(payload(4)), v1(payload(5))]));
    const read = await readAll(path);
    expect(read.records.map((r) => r.bytes[0])).toEqual([4, 5]);
    expect(read.records[0]?.meta).toEqual(meta);
    // Zero-filled and never given a header (cut while being made): nothing to read, nothing torn.
    writeFileSync(path, Buffer.alloc(4096));
    expect(await readAll(path)).toEqual({ records: [], tornBytes: 0, why: null });
  });

  it('refuses a record whose bytes do not match its digest, and lengths larger than any record', async () => {
    const path = await deadSegmentWith([payload(1), payload(2)]);
    const bytes = readFileSync(path);
    const { starts, end } = recordSpans(bytes);
    const second = starts[1] ?? 0;
    // A flipped byte in the second record's data.
    const flipped = Buffer.from(bytes);
    flipped[end - 10] = (flipped[end - 10] ?? 0) ^ 0xff;
    writeFileSync(path, flipped);
    expect((await readAll(path)).records).toHaveLength(1);
    expect((await readAll(path)).why).toMatch(/digest/);
    // A data length of 4 GiB - 1 in the second header: refused before anything is allocated.
    const huge = Buffer.from(bytes);
    huge.writeUInt32LE(0xffffffff, second + 20);
    writeFileSync(path, huge);
    const read = await readAll(path);
    expect(read.records).toHaveLength(1);
    expect(read.why).toMatch(/larger than allowed/);
    // Garbage after the last record, where the zero fill was.
    const garbled = Buffer.from(bytes);
    garbled.write('not a record at all, just bytes', end, 'latin1');
    writeFileSync(path, garbled);
    const garbage = await readAll(path);
    expect(garbage.records).toHaveLength(2);
    expect(garbage.tornBytes).toBe(bytes.length - end);
    expect(garbage.why).toMatch(/no record header/);
  });

  it('names segments so that only its own host reads them back', async () => {
    expect(parseSegmentName(`123.4.5.${hostNamePart('ws-7.radiology.example')}.log`)).toEqual({ pid: 123, instance: 4, seq: 5, host: 'ws-7.radiology.example' });
    expect(parseSegmentName('notes.txt')).toBeNull();
    const dir = join(dataDir, INTAKE_DIR);
    const own = await deadSegmentWith([payload(1)]);
    writeFileSync(join(dir, `${2 ** 22 + 1}.1.1.${hostNamePart('another-host.example')}.log`), payload(1));
    expect(await abandonedSegments(dataDir)).toEqual([own]);
  });

  it('removes the spares of writers that are gone, and only theirs', async () => {
    const dir = join(dataDir, INTAKE_DIR);
    const own = parseSegmentName(basenameOf(await deadSegmentWith([payload(1)])));
    const host = hostNamePart(own?.host ?? '');
    const dead = `${2 ** 22 + 3}.1.9.${host}.spare`;
    const alive = `${process.pid}.999.9.${host}.spare`;
    const elsewhere = `${2 ** 22 + 3}.1.9.${hostNamePart('another-host.example')}.spare`;
    for (const name of [dead, elsewhere]) writeFileSync(join(dir, name), payload(2));
    // A log of this process that is open holds its spares.
    log = openIntakeLog(dataDir, () => undefined);
    writeFileSync(join(dir, alive), payload(3));
    expect(await removeAbandonedSpares(dataDir)).toBe(2);
    expect(segmentsIn()).toContain(elsewhere);
    expect(segmentsIn()).not.toContain(dead);
  });
});
