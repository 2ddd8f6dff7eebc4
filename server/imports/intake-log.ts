/**
 * The intake log: where an instance received over DICOM becomes durable before it is answered,
 * ahead of the archive and the index. A DIMSE sender waits for each answer before it sends the
 * next instance, so the wait for "durable" is paid once per instance in turn: one append to this
 * file, opened O_DSYNC (one thread pool round trip), instead of the archive's chain of a file
 * fsync, a rename, a folder fsync and an index commit (docs/dicom-network.md, "Why a C-STORE
 * costs what it does"). The indexer then archives and indexes what was appended, in batches, and
 * releases each record once its index commit is durable.
 *
 * Records: a fixed header (magic, the segment's tag, meta and data lengths, the data's SHA-256), a
 * small JSON meta (who sent it, when), and the Part 10 file as received. Appends arriving together
 * are written together. A segment left by a process that is gone (a crash, a power cut) is read
 * back at the next start (`readIntakeSegment`), its torn tail (an append that never completed, so
 * was never answered) ignored.
 *
 * Segments are written in place, never grown: each is filled with zeros and synced once before
 * its first record, then records overwrite it. An O_DSYNC write that grows a file must commit the
 * file system's journal (the new size and blocks), and that commit carries whatever else is in it,
 * here the archive's creates, renames and fsyncs: measured on ext4 with the indexer running, 0.37
 * ms median but 1.43 ms mean per append, the mean set by appends stuck behind journal commits. An
 * overwrite of allocated blocks needs only the data on disk (docs/dicom-network.md, "The intake
 * log"). So a full segment whose records are all indexed is kept as a spare and taken again
 * (renamed, so its tag changes) rather than removed; the tag in each record header makes the old
 * records left beyond the new ones end the read instead of coming back. Once nothing waits to be
 * indexed, the used part of the current segment is zeroed and spares are removed, so received
 * patient data stays here only while it is being indexed.
 */
import { createHash, randomBytes } from 'node:crypto';
import { constants, writevSync } from 'node:fs';
import { mkdir, open, readdir, rename, unlink, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { fsyncDir } from '#server/imports/archive.ts';
import { nodeHost } from '#server/jobs/node.ts';
import { pidAlive } from '#server/jobs/jobs.ts';
import { codeOf } from '#server/storage-errors.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';

export const INTAKE_DIR = 'intake';
const MAGIC = Buffer.from('MIAINTK2', 'latin1');
/** Records of mia versions before segments were written in place: read back, never written. */
const MAGIC_V1 = Buffer.from('MIAINTK1', 'latin1');
const TAG_BYTES = 8;
const SEGMENT_MAGIC = Buffer.from('MIASEGV2', 'latin1');
/** The segment header; records follow it. */
const SEGMENT_HEADER_BYTES = 64;
const HEADER_BYTES = MAGIC.length + TAG_BYTES + 4 + 4 + 32;
const HEADER_V1_BYTES = MAGIC_V1.length + 4 + 4 + 32;
const MAX_META_BYTES = 4096;
/** An instance received in memory (256 MiB at most, dicomConfigSchema) behind its Part 10 header. */
const MAX_DATA_BYTES = 257 * 1024 * 1024;
/** Bytes of records a segment holds (a 32 MiB file), zero-filled before use; a larger record gets a segment of its own. */
const SEGMENT_BYTES = 32 * 1024 * 1024 - SEGMENT_HEADER_BYTES;
/** Full segments kept, once indexed, to be written again: enough for the next while the current one fills. */
const SPARES = 2;
const ZERO_CHUNK_BYTES = 1024 * 1024;
/** One writev: appends queued while the previous one ran, up to these. */
const GROUP_RECORDS = 64;
const GROUP_BYTES = 16 * 1024 * 1024;
/**
 * A group up to this size is written in the event loop, not on libuv's thread pool: there it
 * waits in one queue with the archive's file work (hundreds of opens, writes, fsyncs and renames
 * a batch). Measured, 2,000 C-STOREs of 33 KiB on one association with the indexer running: on the
 * pool 0.29 ms median but 0.79-1.41 ms mean per append, 455-627 instances/s; here 0.23-0.25 ms
 * median, 0.43-0.65 ms mean, 550-688/s. A worker thread of its own did worse (0.88 ms mean: two
 * thread hand-offs on two cores shared with the sender). Larger groups would hold the event loop
 * for milliseconds, so they go to the pool.
 */
const SYNC_WRITE_BYTES = 1024 * 1024;

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

/**
 * `size`: bytes of records written, within `capacity` (a first record larger than that fills a
 * segment alone). `grows`: not zero-filled (made for a record larger than a segment, or on a disk
 * without room for a zero fill), so each append extends the file, as before segments were filled.
 */
type Segment = { path: string; handle: FileHandle; tag: Buffer; size: number; capacity: number; grows: boolean; outstanding: number; retired: boolean; closed: boolean };
/** A full segment, indexed, waiting to be written again under a new name. */
type Spare = { path: string; handle: FileHandle };
/** An append waiting for the writer; its header is made once its segment (and so its tag) is known. */
type Pending = { meta: Buffer; data: Buffer; sha256: string; bytes: number; resolve: (appended: Appended) => void; reject: (err: unknown) => void };

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

function spareName(instance: number, seq: number): string {
  return `${process.pid}.${instance}.${seq}.${hostNamePart(nodeHost())}.spare`;
}

/** A segment's own header: its tag, which each of its records repeats. Records from before it was last taken (another tag) are not its own. */
function encodeSegmentHeader(tag: Buffer): Buffer {
  const header = Buffer.alloc(SEGMENT_HEADER_BYTES);
  SEGMENT_MAGIC.copy(header, 0);
  tag.copy(header, SEGMENT_MAGIC.length);
  return header;
}

type SegmentName = { pid: number; instance: number; seq: number; host: string };

export function parseSegmentName(name: string, suffix: 'log' | 'spare' = 'log'): SegmentName | null {
  const match = new RegExp(`^(\\d+)\\.(\\d+)\\.(\\d+)\\.([^.]+)\\.${suffix}$`).exec(name);
  if (!match) return null;
  let host: string;
  try {
    host = decodeURIComponent(match[4] ?? '');
  } catch {
    return null;
  }
  return { pid: Number(match[1]), instance: Number(match[2]), seq: Number(match[3]), host };
}

function encodeHeader(tag: Buffer, meta: Buffer, bytes: number, sha256: string): Buffer {
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header, 0);
  tag.copy(header, MAGIC.length);
  header.writeUInt32LE(meta.length, 16);
  header.writeUInt32LE(bytes, 20);
  header.write(sha256, 24, 32, 'hex');
  return header;
}

const failedWrite = (message: string): Error => Object.assign(new Error(message), { code: 'EIO' });

async function writeFully(handle: FileHandle, bytes: Buffer, at: number): Promise<void> {
  const { bytesWritten } = await handle.write(bytes, 0, bytes.length, at);
  if (bytesWritten !== bytes.length) throw failedWrite(`intake log write took ${bytesWritten} of ${bytes.length} bytes`);
}

/** A write failing with these means the disk (or the user's quota) is full. */
const NO_ROOM = new Set(['ENOSPC', 'EDQUOT', 'EFBIG']);

let zeroChunk: Buffer | undefined;

/** Writes zeros over [from, to) and waits until they are on disk. */
/** Zero-fills through a descriptor of its own, synced once at the end: O_DSYNC would sync each chunk. */
async function zeroFillFile(path: string, from: number, to: number): Promise<void> {
  const plain = await open(path, constants.O_WRONLY);
  try {
    await zeroFill(plain, from, to, false);
  } finally {
    await plain.close();
  }
}

async function zeroFill(handle: FileHandle, from: number, to: number, synced: boolean): Promise<void> {
  zeroChunk ??= Buffer.alloc(ZERO_CHUNK_BYTES);
  for (let at = from; at < to; ) {
    const { bytesWritten } = await handle.write(zeroChunk, 0, Math.min(zeroChunk.length, to - at), at);
    if (bytesWritten === 0) throw failedWrite(`intake log zero fill made no progress at byte ${at}`);
    at += bytesWritten;
  }
  if (!synced) await handle.datasync();
}

async function ensureIntakeDir(dataDir: string): Promise<string> {
  const dir = join(dataDir, INTAKE_DIR);
  const created = await mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  // A new folder's entry lives in the data folder: durable before a record in it is answered.
  if (created !== undefined) await fsyncDir(dataDir);
  return dir;
}

export function openIntakeLog(dataDir: string, onError: (what: string, err: unknown) => void): IntakeLog {
  const instance = (instances += 1);
  openInstances.add(instance);
  let seq = 0;
  let current: Segment | undefined;
  const segments = new Set<Segment>();
  let spares: Spare[] = [];
  let queue: Pending[] = [];
  let writing: Promise<void> | undefined;
  let outstanding = 0;
  let closed = false;
  let emptyWanted = false;

  const background = new Set<Promise<void>>();
  const inBackground = (what: string, work: () => Promise<void>): void => {
    const done = work().catch((err: unknown) => onError(what, err));
    background.add(done);
    void done.finally(() => background.delete(done));
  };

  const removeFile = (handle: FileHandle, path: string): Promise<void> =>
    handle.close().then(
      () => unlink(path),
      () => unlink(path),
    );

  const remove = (segment: Segment): void => {
    segments.delete(segment);
    inBackground('intake.segment_remove_failed', async () => {
      if (segment.closed) return unlink(segment.path);
      segment.closed = true;
      await removeFile(segment.handle, segment.path);
    });
  };

  /** Nothing waits to be indexed in the current segment, nor to be written: a spare now would keep patient data idle. */
  const idle = (): boolean => queue.length === 0 && (current?.outstanding ?? 0) === 0;

  /** A retired segment whose records are all indexed: kept to be written again, or removed. */
  let recycling = 0;
  const recycle = (segment: Segment): void => {
    if (closed || segment.closed || segment.grows || spares.length + recycling >= SPARES || idle()) return remove(segment);
    segments.delete(segment);
    recycling += 1;
    // Renamed at once, not synced: should a cut undo the rename, the segment is read back under its
    // old name and its records, all indexed already, count as duplicates, as with a removal undone.
    const path = join(dataDir, INTAKE_DIR, spareName(instance, (seq += 1)));
    inBackground('intake.segment_recycle_failed', async () => {
      try {
        await rename(segment.path, path);
      } catch (err) {
        await removeFile(segment.handle, segment.path);
        throw err;
      } finally {
        recycling -= 1;
      }
      if (closed || idle()) return removeFile(segment.handle, path);
      spares.push({ path, handle: segment.handle });
    });
  };

  const release = (segment: Segment): void => {
    segment.outstanding -= 1;
    outstanding -= 1;
    if (segment.outstanding > 0) return;
    if (segment.retired) recycle(segment);
    else if (segment === current && !closed) {
      // Everything in it is indexed: emptied (by the writer, between appends) rather than kept
      // until it fills, so received patient data stays here only while it is being indexed.
      emptyWanted = true;
      kick();
    }
  };

  /**
   * Once nothing in the current segment waits to be indexed: its used part zeroed (it stays
   * allocated, for the next record) and the spares removed. A failure only keeps them.
   */
  const emptyIfDone = async (): Promise<void> => {
    const segment = current;
    if (!segment || segment.outstanding > 0) return;
    const unused = spares;
    spares = [];
    for (const spare of unused) inBackground('intake.segment_remove_failed', () => removeFile(spare.handle, spare.path));
    if (segment.size === 0) return;
    try {
      if (segment.grows) await segment.handle.truncate(SEGMENT_HEADER_BYTES);
      else await zeroFill(segment.handle, SEGMENT_HEADER_BYTES, SEGMENT_HEADER_BYTES + segment.size, true);
      segment.size = 0;
    } catch (err) {
      onError('intake.segment_empty_failed', err);
    }
  };

  const retire = (segment: Segment): void => {
    segment.retired = true;
    if (current === segment) current = undefined;
    if (segment.outstanding === 0) recycle(segment);
  };

  /**
   * A segment for records: a spare, or a new file zero-filled (unless `grows`), its header (a new
   * tag) written and its name durable before any record in it is answered. A disk without room for
   * the zero fill gets a segment that grows instead: the instance may still fit.
   */
  const newSegment = async (grows: boolean): Promise<Segment> => {
    const dir = await ensureIntakeDir(dataDir);
    const path = join(dir, segmentName(instance, (seq += 1)));
    const spare = grows ? undefined : spares.shift();
    const tag = randomBytes(TAG_BYTES);
    let handle: FileHandle | undefined;
    let created = false;
    try {
      if (spare) {
        handle = spare.handle;
        // The new tag first, under the spare's name (which a later start removes): renamed with its
        // old header, its indexed records would be read back as its own.
        await writeFully(handle, encodeSegmentHeader(tag), 0);
        await rename(spare.path, path);
      } else {
        handle = await open(path, constants.O_RDWR | constants.O_CREAT | constants.O_EXCL | constants.O_DSYNC, PRIVATE_FILE_MODE);
        created = true;
        if (!grows) {
          try {
            await zeroFillFile(path, SEGMENT_HEADER_BYTES, SEGMENT_HEADER_BYTES + SEGMENT_BYTES);
          } catch (err) {
            if (!NO_ROOM.has(codeOf(err) ?? '')) throw err;
            await handle.truncate(0);
            grows = true;
          }
        }
        await writeFully(handle, encodeSegmentHeader(tag), 0);
      }
      await fsyncDir(dir);
    } catch (err) {
      await handle?.close().catch(() => undefined);
      if (created) await unlink(path).catch(() => undefined);
      if (spare) await Promise.all([unlink(spare.path), unlink(path)].map((p) => p.catch(() => undefined)));
      throw err;
    }
    const segment: Segment = { path, handle, tag, size: 0, capacity: SEGMENT_BYTES, grows, outstanding: 0, retired: false, closed: false };
    segments.add(segment);
    return segment;
  };

  /** The segment the next record (of `bytes`) goes to. */
  const segmentFor = async (bytes: number): Promise<Segment> => {
    if (current && (current.size === 0 || current.size + bytes <= current.capacity)) return current;
    if (current) retire(current);
    current = await newSegment(bytes > SEGMENT_BYTES);
    return current;
  };

  const writeGroup = async (segment: Segment, group: Pending[]): Promise<void> => {
    const start = segment.size;
    const total = group.reduce((sum, p) => sum + p.bytes, 0);
    try {
      // O_DSYNC: the records are on disk when writev returns; within a zero-filled segment nothing
      // else (size, blocks) needs to be.
      const parts = group.flatMap((p) => [encodeHeader(segment.tag, p.meta, p.data.length, p.sha256), p.meta, p.data]);
      const at = SEGMENT_HEADER_BYTES + start;
      const bytesWritten = total <= SYNC_WRITE_BYTES ? writevSync(segment.handle.fd, parts, at) : (await segment.handle.writev(parts, at)).bytesWritten;
      if (bytesWritten !== total) throw failedWrite(`intake log write took ${bytesWritten} of ${total} bytes`);
      segment.size += total;
      segment.outstanding += group.length;
      outstanding += group.length;
      for (const p of group) {
        let released = false;
        p.resolve({
          release: () => {
            if (released) return;
            released = true;
            release(segment);
          },
        });
      }
      if (segment.size >= segment.capacity) retire(segment);
    } catch (err) {
      // Part of the group may be on disk. In a zero-filled segment the next group overwrites it
      // (its tag and digest tell a torn record from a whole one), but it is not known which bytes
      // landed: write no more into this segment (a torn record ends what a later start reads).
      retire(segment);
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
      let segment: Segment;
      try {
        segment = await segmentFor(queue[0]!.bytes);
      } catch (err) {
        const [failed] = queue.splice(0, 1);
        failed?.reject(err);
        continue;
      }
      const room = segment.capacity - segment.size;
      let bytes = 0;
      let n = 0;
      while (n < queue.length && n < GROUP_RECORDS && (n === 0 || (bytes + queue[n]!.bytes <= GROUP_BYTES && bytes + queue[n]!.bytes <= room))) bytes += queue[n++]!.bytes;
      const group = queue.slice(0, n);
      queue = queue.slice(n);
      await writeGroup(segment, group);
    }
  };

  return {
    append(meta, bytes, sha256) {
      if (closed) return Promise.reject(new Error('the intake log is closed'));
      if (bytes.length > MAX_DATA_BYTES) return Promise.reject(new Error('instance too large for the intake log'));
      const metaBytes = Buffer.from(JSON.stringify(meta), 'utf8');
      if (metaBytes.length > MAX_META_BYTES) return Promise.reject(new Error('intake record meta too long'));
      return new Promise<Appended>((resolve, reject) => {
        queue.push({ meta: metaBytes, data: bytes, sha256, bytes: HEADER_BYTES + metaBytes.length + bytes.length, resolve, reject });
        kick();
      });
    },
    outstanding: () => outstanding,
    async close() {
      closed = true;
      await writing;
      openInstances.delete(instance);
      for (const spare of spares) inBackground('intake.segment_remove_failed', () => removeFile(spare.handle, spare.path));
      spares = [];
      for (const segment of [...segments]) {
        if (segment.outstanding === 0) {
          retire(segment);
          continue;
        }
        segment.closed = true;
        await segment.handle.close().catch((err: unknown) => onError('intake.segment_close_failed', err));
      }
      current = undefined;
      await Promise.all([...background]);
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

/**
 * Removes the spares of writers on this host that are gone: indexed records only, under a name
 * no start reads back. Returns how many.
 */
export async function removeAbandonedSpares(dataDir: string): Promise<number> {
  const dir = join(dataDir, INTAKE_DIR);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  const host = nodeHost();
  let removed = 0;
  for (const name of names) {
    const parsed = parseSegmentName(name, 'spare');
    if (!parsed || parsed.host !== host) continue;
    const alive = parsed.pid === process.pid ? openInstances.has(parsed.instance) : pidAlive(parsed.pid);
    if (alive) continue;
    await unlink(join(dir, name));
    removed += 1;
  }
  return removed;
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
    let records = 0;
    let at = 0;
    const torn = (why: string): SegmentEnd => ({ records, tornBytes: size - at, why });
    const head = Buffer.alloc(SEGMENT_HEADER_BYTES);
    const { bytesRead } = await handle.read(head, 0, SEGMENT_HEADER_BYTES, 0);
    // Records of this segment carry its tag; a segment written before segments had headers (v1)
    // starts with its first record.
    let tag: Buffer | null;
    if (bytesRead === SEGMENT_HEADER_BYTES && head.subarray(0, SEGMENT_MAGIC.length).equals(SEGMENT_MAGIC)) {
      tag = Buffer.from(head.subarray(SEGMENT_MAGIC.length, SEGMENT_MAGIC.length + TAG_BYTES));
      at = SEGMENT_HEADER_BYTES;
    } else if (bytesRead >= MAGIC_V1.length && head.subarray(0, MAGIC_V1.length).equals(MAGIC_V1)) {
      tag = null;
    } else if (allZero(head.subarray(0, bytesRead))) {
      // Cut while it was being made, before its header: nothing in it was answered.
      return { records: 0, tornBytes: 0, why: null };
    } else {
      return torn('no segment header');
    }
    const headerBytes = tag ? HEADER_BYTES : HEADER_V1_BYTES;
    const header = Buffer.alloc(headerBytes);
    while (at < size) {
      const { bytesRead: got } = await handle.read(header, 0, headerBytes, at);
      // The zero-filled rest of the segment: where its records end.
      if (allZero(header.subarray(0, got))) return { records, tornBytes: 0, why: null };
      if (got < headerBytes) return torn('a header cut short');
      const magic = header.subarray(0, MAGIC.length);
      if (tag) {
        if (!magic.equals(MAGIC)) return torn('no record header');
        // A record of the segment's earlier use, beyond the end of this one's records.
        if (!header.subarray(MAGIC.length, MAGIC.length + TAG_BYTES).equals(tag)) return { records, tornBytes: 0, why: null };
      } else if (!magic.equals(MAGIC_V1)) {
        return torn('no record header');
      }
      const lengths = tag ? MAGIC.length + TAG_BYTES : MAGIC_V1.length;
      const metaBytes = header.readUInt32LE(lengths);
      const dataBytes = header.readUInt32LE(lengths + 4);
      if (metaBytes > MAX_META_BYTES || dataBytes > MAX_DATA_BYTES) return torn('a record larger than allowed');
      if (size - at - headerBytes < metaBytes + dataBytes) return torn('a record cut short');
      const body = Buffer.alloc(metaBytes + dataBytes);
      await handle.read(body, 0, body.length, at + headerBytes);
      const sha256 = header.subarray(lengths + 8, lengths + 40).toString('hex');
      const meta = parseMeta(body.subarray(0, metaBytes));
      if (!meta) return torn('record meta is not what mia writes');
      const bytes = body.subarray(metaBytes);
      if (createHash('sha256').update(bytes).digest('hex') !== sha256) return torn('a record whose content does not match its digest');
      await onRecord({ meta, bytes, sha256 });
      records += 1;
      at += headerBytes + metaBytes + dataBytes;
    }
    return { records, tornBytes: 0, why: null };
  } finally {
    await handle.close();
  }
}

function allZero(bytes: Buffer): boolean {
  for (const b of bytes) if (b !== 0) return false;
  return true;
}
