/**
 * The content-addressed archive: <data>/archive/ab/<sha256>.dcm (256 folders: few enough that a
 * batch touches, creates and fsyncs few directories, many enough to keep each one small). Each file is written under a
 * temporary name, fsynced, renamed into place, and its directory fsynced, all before the database
 * commit that makes the instance visible (`flush` is called before each commit), so a crash at
 * any moment leaves at worst an unreferenced file, never an indexed file missing or half written.
 *
 * Temporary files live in archive/.staging, named with their writer's pid: what a killed writer
 * leaves there is whole DICOM files with patient data, and one known place is what lets every mia
 * start find and remove them (leftovers.ts) without listing the whole archive. Staged files are
 * spread over 16 folders in it by their digest's first hex digit: creating and fsyncing many files
 * at once in one folder made the file system serialize on it (2,000 files of 33 KiB, 32 in flight
 * on the pool: 1,123-1,254 files/s and 2.4-2.8 s of system CPU in one folder against 1,487-1,755
 * and 1.6-1.9 s in 16, interleaved runs, 2026-11-27; 8 to 64 folders measured alike).
 * The rename into place is durable once the destination directory is fsynced; should the
 * staging folder's own entry survive a power cut too, it is a second name the cleanup removes.
 *
 * Each staged file is created, written and fsynced on libuv's thread pool as soon as it is staged,
 * many at once, where the file system commits them together (one journal commit for many files),
 * which is what makes durable imports fast. None of it runs in the event loop: on ext4 creating
 * a file waits while the journal commits other files' fsyncs, and with the writes in the event
 * loop `mia import` spent half its time blocked in open(2) (CPU profile, 2,000 files, 2026-11-26).
 * `flush` takes what was staged when it is called, waits for those writes, renames them into
 * place and fsyncs their folders, so the next batch can be staged while the previous one flushes.
 */
import { fsync, open, constants, close, rename, unlink, write } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';

export const ARCHIVE_DIR = 'archive';
/** Where files are written before they are renamed into the archive (relative to the data folder). */
export const STAGING_DIR = join(ARCHIVE_DIR, '.staging');

// The callback API, promisified: a FileHandle (fs/promises) cost the event loop 0.15 ms per
// file written and fsynced, these 0.1 ms (2,000 files, 64 in flight, eventLoopUtilization).
const fsyncAsync = promisify(fsync);
const closeAsync = promisify(close);
const openAsync = promisify(open);
const writeAsync = promisify(write);
const renameAsync = promisify(rename);
const unlinkAsync = promisify(unlink);

/** Path of a stored file relative to the data folder (what the instances table keeps). */
export function archivePathFor(sha256: string): string {
  return join(ARCHIVE_DIR, sha256.slice(0, 2), `${sha256}.dcm`);
}

/** The folder of archive/.staging a file with this digest is staged in (see the top of this file). */
export function stagingShardOf(sha256: string): string {
  return sha256.slice(0, 1);
}

/** Whether a name in archive/.staging is one of its folders of staged files. */
export function isStagingShard(name: string): boolean {
  return /^[0-9a-f]$/.test(name);
}

/** Temporary files start with a dot and end in .tmp: never a name the index refers to. */
export function isArchiveTempName(name: string): boolean {
  return name.startsWith('.') && name.endsWith('.tmp');
}

/** The pid of the process that wrote a temporary file (.<sha256 prefix>.<pid>.<n>.tmp), if the name says. */
export function tempWriterPid(name: string): number | null {
  const match = /^\.[0-9a-f]+\.(\d+)\.\d+\.tmp$/.exec(name);
  return match?.[1] ? Number(match[1]) : null;
}

export type ArchiveWriter = {
  /** The data folder the archive is in. */
  readonly dataDir: string;
  /** Writes the bytes under a temporary name (not yet durable); returns the final relative path. */
  stage(bytes: Uint8Array, sha256: string): string;
  /**
   * Takes a file already written whole under a name from `stagingTempPath` (a C-STORE streamed
   * there as it arrived) as staged, so it is renamed into place rather than copied; returns the
   * final relative path. Flushed and discarded like what `stage` wrote. `synced`: the writer's
   * own fsync of the file, already under way (it overlaps the checks), instead of one here.
   */
  adopt(temp: string, sha256: string, synced?: Promise<void>): string;
  /** Waits for the staged files' writes and fsyncs, renames them into place, fsyncs their directories. Then they may be indexed. */
  flush(): Promise<void>;
  /** Removes what was staged and not flushed (once its write has settled), after a failure: a
   * full disk is a likely one, and the files would hold on to its space until the next start. */
  discard(): Promise<void>;
  /**
   * Waits until the bytes staged and not yet written are at most `maxBytes`: a file's bytes stay
   * in memory until its write ends, so a writer of large files waits here between files.
   */
  room(maxBytes: number): Promise<void>;
};

/** A staged file: `written` settles once it is whole and fsynced under `temp` (or has failed and is gone). */
type Staged = { temp: string; final: string; written: Promise<void> };

async function removeTemp(temp: string): Promise<void> {
  try {
    await unlinkAsync(temp);
  } catch {
    // Already gone: nothing holds the space any more.
  }
}

/** Creates `temp` (never over another file), writes `bytes`, fsyncs; on failure removes it. */
async function writeDurably(temp: string, bytes: Uint8Array): Promise<void> {
  const fd = await openAsync(temp, 'wx', PRIVATE_FILE_MODE);
  try {
    for (let off = 0; off < bytes.byteLength; ) {
      const { bytesWritten } = await writeAsync(fd, bytes, off, bytes.byteLength - off);
      // A write that takes nothing would loop forever; it is a failed write.
      if (bytesWritten === 0) throw new Error(`archive write made no progress at byte ${off}`);
      off += bytesWritten;
    }
    await fsyncAsync(fd);
  } catch (err) {
    await closeAsync(fd).catch(() => undefined);
    await removeTemp(temp);
    throw err;
  }
  await closeAsync(fd);
}

/** fsync of a file someone else wrote (read-only is enough for fsync on Linux). */
async function syncWritten(temp: string): Promise<void> {
  const fd = await openAsync(temp, constants.O_RDONLY);
  try {
    await fsyncAsync(fd);
  } finally {
    await closeAsync(fd);
  }
}

/** Settles `staged` without rejecting; the first failure, if any. */
async function settle(staged: readonly Staged[]): Promise<unknown> {
  const results = await Promise.allSettled(staged.map((s) => s.written));
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  return failed ? (failed.reason as unknown) ?? new Error('archive write failed') : undefined;
}

export async function fsyncDir(path: string): Promise<void> {
  // Opened on the thread pool too: a flush fsyncs up to 256 folders, and opening each in the
  // event loop waited on the journal like creating a file does.
  const fd = await openAsync(path, constants.O_RDONLY);
  try {
    await fsyncAsync(fd);
  } finally {
    await closeAsync(fd);
  }
}

let tempCounter = 0;

/**
 * A new temporary name in the staging folder for a file whose digest is not known yet (written
 * as it arrives): "0" stands for the digest prefix, so leftovers.ts still reads the writer's pid.
 */
export function stagingTempPath(dataDir: string): string {
  return join(dataDir, STAGING_DIR, `.0.${process.pid}.${(tempCounter += 1)}.tmp`);
}

export function createArchiveWriter(dataDir: string): ArchiveWriter {
  const staging = join(dataDir, STAGING_DIR);
  // Each folder is made sure of once, on the thread pool (a fresh archive creates 256 of them:
  // 0.6 ms each in the event loop, measured, as mkdir waits on the journal like open does).
  const knownDirs = new Map<string, Promise<void>>();
  const touchedDirs = new Set<string>();
  let staged: Staged[] = [];
  // Writes under way and the bytes they hold (see `room`).
  const writing = new Set<Promise<void>>();
  let writingBytes = 0;
  const stagedFinals = new Set<string>();

  const ensureDir = (dir: string): Promise<void> => {
    let made = knownDirs.get(dir);
    if (!made) {
      made = mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE }).then((created) => {
        // A new directory's own entry lives in its parent: that parent needs an fsync as well.
        if (created !== undefined) {
          for (let d = dir; d.length >= created.length; d = dirname(d)) touchedDirs.add(d);
          touchedDirs.add(dirname(created));
        }
      });
      // A failure is seen by every file that waits on it; a later file tries again.
      void made.catch(() => knownDirs.delete(dir));
      knownDirs.set(dir, made);
    }
    return made;
  };

  return {
    dataDir,
    stage(bytes, sha256) {
      const relative = archivePathFor(sha256);
      const final = join(dataDir, relative);
      if (stagedFinals.has(final)) return relative;
      // Written even when the final name exists: only instances not yet indexed get here, so an
      // existing file is one a crash left unreferenced (possibly incomplete) or one a concurrent
      // import of the same file is writing; renaming identical bytes over it is safe either way.
      // pid + a counter: unique among concurrent importers without asking for random bytes, and
      // the pid tells a later start whether the writer is still alive (leftovers.ts).
      const shard = join(staging, stagingShardOf(sha256));
      const temp = join(shard, `.${sha256.slice(0, 16)}.${process.pid}.${(tempCounter += 1)}.tmp`);
      const written = Promise.all([ensureDir(dirname(final)), ensureDir(shard)]).then(() => writeDurably(temp, bytes));
      const size = bytes.byteLength;
      writingBytes += size;
      const settled = written.then(
        () => undefined,
        () => undefined,
      );
      writing.add(settled);
      void settled.then(() => {
        writing.delete(settled);
        writingBytes -= size;
      });
      // Awaited by flush or discard; until then a failure must not count as unhandled.
      void written.catch(() => undefined);
      staged.push({ temp, final, written });
      stagedFinals.add(final);
      return relative;
    },
    adopt(temp, sha256, synced) {
      const relative = archivePathFor(sha256);
      const final = join(dataDir, relative);
      // The same content staged twice in one batch: the first is renamed, this one is left to its
      // writer to remove (or the next start's cleanup).
      if (stagedFinals.has(final)) return relative;
      const written = Promise.all([ensureDir(dirname(final)), synced ?? syncWritten(temp)]).then(() => undefined);
      void written.catch(() => undefined);
      staged.push({ temp, final, written });
      stagedFinals.add(final);
      return relative;
    },
    async flush() {
      const batch = staged;
      staged = [];
      stagedFinals.clear();
      const failure = await settle(batch);
      if (failure !== undefined) {
        // Not durable, so never renamed into place, and not left behind either.
        await Promise.all(batch.map((s) => removeTemp(s.temp)));
        throw failure;
      }
      const renamed = await Promise.allSettled(batch.map((s) => renameAsync(s.temp, s.final)));
      const refused = renamed.find((r): r is PromiseRejectedResult => r.status === 'rejected');
      if (refused) {
        // The batch is gone from `staged`, so a discard() after this failure would not reach
        // these copies: each retry of the caller left another full copy of its instances.
        await Promise.all(batch.map((s, i) => (renamed[i]?.status === 'rejected' ? removeTemp(s.temp) : undefined)));
        throw refused.reason;
      }
      for (const s of batch) touchedDirs.add(dirname(s.final));
      const dirs = [...touchedDirs];
      touchedDirs.clear();
      await Promise.all(dirs.map(fsyncDir));
    },
    async room(maxBytes) {
      while (writingBytes > maxBytes && writing.size > 0) await Promise.race(writing);
    },
    async discard() {
      const batch = staged;
      staged = [];
      stagedFinals.clear();
      await settle(batch);
      await Promise.all(batch.map((s) => removeTemp(s.temp)));
    },
  };
}
