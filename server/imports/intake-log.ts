/**
 * The intake log: where an instance received over DICOM becomes durable before it is answered,
 * ahead of the archive and the index. A DIMSE sender waits for each answer before it sends the
 * next instance, so the wait for "durable" is paid once per instance in turn: one append to this
 * file, opened O_DSYNC (one thread pool round trip), instead of the archive's chain of a file
 * fsync, a rename, a folder fsync and an index commit (docs/dicom-network.md, "Why a C-STORE
 * costs what it does"). The indexer then archives and indexes what was appended, in batches, and
 * releases each record once its index commit is durable.
 *
 * Records: a fixed header (magic, meta and data lengths, the data's SHA-256), a small JSON meta
 * (who sent it, when), and the Part 10 file as received. Appends arriving together are written
 * together. A segment is retired at SEGMENT_BYTES and removed once all its records are released,
 * so the log holds about the unindexed backlog. A segment left by a process that is gone (a
 * crash, a power cut) is read back at the next start (`readIntakeSegment`), its torn tail (an
 * append that never completed, so was never answered) ignored.
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir } from '#server/imports/archive.ts';
import { nodeHost } from '#server/jobs/node.ts';
import { pidAlive } from '#server/jobs/jobs.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';

export const INTAKE_DIR = 'intake';
const MAGIC = Buffer.from('MIAINTK1', 'latin1');
const HEADER_BYTES = MAGIC.length + 4 + 4 + 32;
const MAX_META_BYTES = 4096;
/** An instance received in memory (256 MiB at most, dicomConfigSchema) behind its Part 10 header. */
const MAX_DATA_BYTES = 257 * 1024 * 1024;
/** A segment is retired (and removed once indexed) past this size: the log stays near the backlog. */
const SEGMENT_BYTES = 32 * 1024 * 1024;
/** One writev: appends queued while the previous one ran, up to these. */
const GROUP_RECORDS = 64;
const GROUP_BYTES = 16 * 1024 * 1024;

export type IntakeMeta = { callingAeTitle: string; host: string; receivedAt: string };
export type IntakeRecord = { meta: IntakeMeta; bytes: Buffer; sha256: string };
/** A durable record: `release` once its instance's index commit is durable. */
export type Appended = { release(): void };

export type IntakeLog = {
  /** Resolves once the record is durable; rejects (nothing of it kept) if the write failed. */
  append(meta: IntakeMeta, bytes: Buffer, sha256: string): Promise<Appended>;
  /** Records appended and not yet released. */
  outstanding(): number;
  /** Closes the log; segments whose records are all released are removed, the rest kept for the next start. */
  close(): Promise<void>;
};

type Segment = { path: string; handle: FileHandle; size: number; outstanding: number; retired: boolean; closed: boolean };
type Pending = { parts: Buffer[]; bytes: number; resolve: (appended: Appended) => void; reject: (err: unknown) => void };

/** Logs open in this process, by instance number: their segments are not abandoned. */
const openInstances = new Set<number>();
let instances = 0;

/** The host in a segment's name: its dots escaped too, as they separate the name's parts. */
export function hostNamePart(host: string): string {
  return encodeURIComponent(host).replace(/\./g, '%2E');
}

function segmentName(instance: number, seq: number): string {
  return `${process.pid}.${instance}.${seq}.${hostNamePart(nodeHost())}.log`;
}

type SegmentName = { pid: number; instance: number; seq: number; host: string };

export function parseSegmentName(name: string): SegmentName | null {
  const match = /^(\d+)\.(\d+)\.(\d+)\.([^.]+)\.log$/.exec(name);
  if (!match) return null;
  let host: string;
  try {
    host = decodeURIComponent(match[4] ?? '');
  } catch {
    return null;
  }
  return { pid: Number(match[1]), instance: Number(match[2]), seq: Number(match[3]), host };
}

function encodeHeader(meta: Buffer, bytes: number, sha256: string): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt32LE(meta.length, 8);
  header.writeUInt32LE(bytes, 12);
  header.write(sha256, 16, 32, 'hex');
  return header;
}

async function ensureIntakeDir(dataDir: string): Promise<string> {
  const dir = join(dataDir, INTAKE_DIR);
  const created = await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  // A new folder's entry lives in the data folder: durable before a record in it is answered.
  if (created !== undefined) await fsyncDir(dataDir);
  return dir;
}

const failedWrite = (message: string): Error => Object.assign(new Error(message), { code: 'EIO' });

export function openIntakeLog(dataDir: string, onError: (what: string, err: unknown) => void): IntakeLog {
  const instance = (instances += 1);
  openInstances.add(instance);
  let seq = 0;
  let current: Segment | undefined;
  const segments = new Set<Segment>();
  let queue: Pending[] = [];
  let writing: Promise<void> | undefined;
  let outstanding = 0;
  let closed = false;
  let emptyWanted = false;

  const removing = new Set<Promise<void>>();
  const remove = (segment: Segment): void => {
    segments.delete(segment);
    const removed = (async () => {
      if (!segment.closed) {
        segment.closed = true;
        await segment.handle.close();
      }
      await unlink(segment.path);
    })().catch((err: unknown) => onError('intake.segment_remove_failed', err));
    removing.add(removed);
    void removed.finally(() => removing.delete(removed));
  };

  const release = (segment: Segment): void => {
    segment.outstanding -= 1;
    outstanding -= 1;
    if (segment.outstanding > 0) return;
    if (segment.retired) remove(segment);
    else if (segment === current && !closed) {
      // Everything in it is indexed: emptied (by the writer, between appends) rather than kept
      // until it fills, so received patient data stays here only while it is being indexed.
      emptyWanted = true;
      kick();
    }
  };

  /** Empties the current segment if nothing in it waits to be indexed; a failure only keeps it. */
  const emptyIfDone = async (): Promise<void> => {
    const segment = current;
    if (!segment || segment.outstanding > 0 || segment.size === 0) return;
    try {
      await segment.handle.truncate(0);
      segment.size = 0;
    } catch (err) {
      onError('intake.segment_empty_failed', err);
    }
  };

  const retire = (segment: Segment): void => {
    segment.retired = true;
    if (current === segment) current = undefined;
    if (segment.outstanding === 0) remove(segment);
  };

  const segmentFor = async (): Promise<Segment> => {
    if (current && current.size < SEGMENT_BYTES) return current;
    if (current) retire(current);
    const dir = await ensureIntakeDir(dataDir);
    const path = join(dir, segmentName(instance, (seq += 1)));
    const handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_APPEND | constants.O_DSYNC, PRIVATE_FILE_MODE);
    try {
      // The file's own entry must survive a cut before a record in it is answered.
      await fsyncDir(dir);
    } catch (err) {
      await handle.close().catch(() => undefined);
      await unlink(path).catch(() => undefined);
      throw err;
    }
    const segment: Segment = { path, handle, size: 0, outstanding: 0, retired: false, closed: false };
    segments.add(segment);
    current = segment;
    return segment;
  };

  const writeGroup = async (group: Pending[]): Promise<void> => {
    let segment: Segment | undefined;
    let start = 0;
    const total = group.reduce((sum, p) => sum + p.bytes, 0);
    try {
      segment = await segmentFor();
      start = segment.size;
      // O_DSYNC: the data and the size that reaches it are on disk when writev returns.
      const { bytesWritten } = await segment.handle.writev(group.flatMap((p) => p.parts));
      if (bytesWritten !== total) throw failedWrite(`intake log write took ${bytesWritten} of ${total} bytes`);
      segment.size += total;
      segment.outstanding += group.length;
      outstanding += group.length;
      const owner = segment;
      for (const p of group) {
        let released = false;
        p.resolve({
          release: () => {
            if (released) return;
            released = true;
            release(owner);
          },
        });
      }
    } catch (err) {
      if (segment) {
        // Part of the group may be on disk: cut it off, or, failing that, write no more after it
        // (a torn record ends what a later start reads of the segment).
        const cut = await segment.handle.truncate(start).then(() => true, () => false);
        if (!cut) retire(segment);
      }
      for (const p of group) p.reject(err);
    }
  };

  // Started again if work came in while the last pump was ending (after its loop, before its finally).
  const kick = (): void => {
    if (writing) return;
    writing = pump().finally(() => {
      writing = undefined;
      if (queue.length > 0 || emptyWanted) kick();
    });
  };

  const pump = async (): Promise<void> => {
    while (queue.length > 0 || emptyWanted) {
      if (queue.length === 0) {
        emptyWanted = false;
        await emptyIfDone();
        continue;
      }
      let bytes = 0;
      let n = 0;
      while (n < queue.length && n < GROUP_RECORDS && (n === 0 || bytes + queue[n]!.bytes <= GROUP_BYTES)) bytes += queue[n++]!.bytes;
      const group = queue.slice(0, n);
      queue = queue.slice(n);
      await writeGroup(group);
    }
  };

  return {
    append(meta, bytes, sha256) {
      if (closed) return Promise.reject(new Error('the intake log is closed'));
      if (bytes.length > MAX_DATA_BYTES) return Promise.reject(new Error('instance too large for the intake log'));
      const metaBytes = Buffer.from(JSON.stringify(meta), 'utf8');
      if (metaBytes.length > MAX_META_BYTES) return Promise.reject(new Error('intake record meta too long'));
      return new Promise<Appended>((resolve, reject) => {
        queue.push({ parts: [encodeHeader(metaBytes, bytes.length, sha256), metaBytes, bytes], bytes: HEADER_BYTES + metaBytes.length + bytes.length, resolve, reject });
        kick();
      });
    },
    outstanding: () => outstanding,
    async close() {
      closed = true;
      await writing;
      openInstances.delete(instance);
      for (const segment of [...segments]) {
        if (segment.outstanding === 0) {
          retire(segment);
          continue;
        }
        segment.closed = true;
        await segment.handle.close().catch((err: unknown) => onError('intake.segment_close_failed', err));
      }
      current = undefined;
      await Promise.all([...removing]);
    },
  };
}

/**
 * Segments no live writer holds: written by a process on this host that is gone, or by a log of
 * this process that was closed with records not indexed. A segment of another host (a data
 * folder shared by hub nodes) is left to that host's next start. Oldest first.
 */
export async function abandonedSegments(dataDir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(join(dataDir, INTAKE_DIR));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const host = nodeHost();
  const found: Array<SegmentName & { name: string }> = [];
  for (const name of names) {
    const parsed = parseSegmentName(name);
    if (!parsed || parsed.host !== host) continue;
    const alive = parsed.pid === process.pid ? openInstances.has(parsed.instance) : pidAlive(parsed.pid);
    if (!alive) found.push({ ...parsed, name });
  }
  found.sort((a, b) => a.pid - b.pid || a.instance - b.instance || a.seq - b.seq);
  return found.map((f) => join(dataDir, INTAKE_DIR, f.name));
}

function parseMeta(bytes: Buffer): IntakeMeta | null {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const { callingAeTitle, host, receivedAt } = value as Record<string, unknown>;
  return typeof callingAeTitle === 'string' && typeof host === 'string' && typeof receivedAt === 'string' ? { callingAeTitle, host, receivedAt } : null;
}

export type SegmentEnd = { records: number; tornBytes: number; why: string | null };

/**
 * The records of a segment, in order, until its end or the first record that is not whole (a
 * torn append, never answered): what follows it is reported as `tornBytes`. No length read from
 * the file is used before it is checked against the largest record mia writes and the file's size.
 */
export async function readIntakeSegment(path: string, onRecord: (record: IntakeRecord) => Promise<void>): Promise<SegmentEnd> {
  const handle = await open(path, 'r');
  try {
    const size = (await handle.stat()).size;
    let at = 0;
    let records = 0;
    const header = Buffer.alloc(HEADER_BYTES);
    const torn = (why: string): SegmentEnd => ({ records, tornBytes: size - at, why });
    while (at < size) {
      if (size - at < HEADER_BYTES) return torn('a header cut short');
      await handle.read(header, 0, HEADER_BYTES, at);
      if (!header.subarray(0, MAGIC.length).equals(MAGIC)) return torn('no record header');
      const metaBytes = header.readUInt32LE(8);
      const dataBytes = header.readUInt32LE(12);
      if (metaBytes > MAX_META_BYTES || dataBytes > MAX_DATA_BYTES) return torn('a record larger than allowed');
      if (size - at - HEADER_BYTES < metaBytes + dataBytes) return torn('a record cut short');
      const body = Buffer.alloc(metaBytes + dataBytes);
      await handle.read(body, 0, body.length, at + HEADER_BYTES);
      const sha256 = header.subarray(16, 48).toString('hex');
      const meta = parseMeta(body.subarray(0, metaBytes));
      if (!meta) return torn('record meta is not what mia writes');
      const bytes = body.subarray(metaBytes);
      if (createHash('sha256').update(bytes).digest('hex') !== sha256) return torn('a record whose content does not match its digest');
      await onRecord({ meta, bytes, sha256 });
      records += 1;
      at += HEADER_BYTES + metaBytes + dataBytes;
    }
    return { records, tornBytes: 0, why: null };
  } finally {
    await handle.close();
  }
}
