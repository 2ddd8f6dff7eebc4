/**
 * The content-addressed archive: <data>/archive/ab/<sha256>.dcm (256 folders: few enough that a
 * batch touches, creates and fsyncs few directories, many enough to keep each one small). Each file is written under a
 * temporary name, fsynced, renamed into place, and its directory fsynced, all before the database
 * commit that makes the instance visible (`flush` is called before each commit), so a crash at
 * any moment leaves at worst an unreferenced file, never an indexed file missing or half written.
 *
 * Temporary files live in one folder, archive/.staging, named with their writer's pid: what a
 * killed writer leaves there is whole DICOM files with patient data, and one folder is what
 * lets every mia start find and remove them (leftovers.ts) without listing the whole archive.
 * The rename into place is durable once the destination directory is fsynced; should the
 * staging folder's own entry survive a power cut too, it is a second name the cleanup removes.
 *
 * Work is done per batch: small writes go straight to the page cache, then the batch's fsyncs run
 * in parallel on the thread pool, where the file system commits them together (one journal
 * commit for many files), which is what makes durable imports fast. `flush` takes what was
 * staged when it is called, so the next batch can be staged while the previous one flushes.
 */
import { closeSync, fsync, mkdirSync, openSync, renameSync, unlinkSync, writeSync, constants, close } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';

export const ARCHIVE_DIR = 'archive';
/** Where files are written before they are renamed into the archive (relative to the data folder). */
export const STAGING_DIR = join(ARCHIVE_DIR, '.staging');

const fsyncAsync = promisify(fsync);
const closeAsync = promisify(close);

/** Path of a stored file relative to the data folder (what the instances table keeps). */
export function archivePathFor(sha256: string): string {
  return join(ARCHIVE_DIR, sha256.slice(0, 2), `${sha256}.dcm`);
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
   * final relative path. Flushed and discarded like what `stage` wrote.
   */
  adopt(temp: string, sha256: string): string;
  /** fsync of staged files, rename into place, fsync of their directories. Then they may be indexed. */
  flush(): Promise<void>;
  /** Closes and removes what was staged and not flushed, after a failure: a full disk is a
   * likely one, and the files would hold on to its space until the next start. */
  discard(): void;
};

function removeTemp(s: Staged, close: boolean): void {
  try {
    if (close) closeSync(s.fd);
    unlinkSync(s.temp);
  } catch {
    // Already gone (or closed): nothing holds the space any more.
  }
}

type Staged = { fd: number; temp: string; final: string };

export async function fsyncDir(path: string): Promise<void> {
  const fd = openSync(path, constants.O_RDONLY);
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
  const knownDirs = new Set<string>();
  const touchedDirs = new Set<string>();
  let staged: Staged[] = [];
  const stagedFinals = new Set<string>();

  const ensureDir = (dir: string): void => {
    if (knownDirs.has(dir)) return;
    const created = mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
    // A new directory's own entry lives in its parent: that parent needs an fsync as well.
    if (created !== undefined) {
      for (let d = dir; d.length >= created.length; d = dirname(d)) touchedDirs.add(d);
      touchedDirs.add(dirname(created));
    }
    knownDirs.add(dir);
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
      const dir = dirname(final);
      ensureDir(dir);
      ensureDir(staging);
      // pid + a counter: unique among concurrent importers without asking for random bytes, and
      // the pid tells a later start whether the writer is still alive (leftovers.ts).
      const temp = join(staging, `.${sha256.slice(0, 16)}.${process.pid}.${(tempCounter += 1)}.tmp`);
      const fd = openSync(temp, 'wx', PRIVATE_FILE_MODE);
      try {
        for (let off = 0; off < bytes.byteLength; ) off += writeSync(fd, bytes, off);
      } catch (err) {
        closeSync(fd);
        unlinkSync(temp);
        throw err;
      }
      staged.push({ fd, temp, final });
      stagedFinals.add(final);
      return relative;
    },
    adopt(temp, sha256) {
      const relative = archivePathFor(sha256);
      const final = join(dataDir, relative);
      // The same content staged twice in one batch: the first is renamed, this one is left to its
      // writer to remove (or the next start's cleanup).
      if (stagedFinals.has(final)) return relative;
      ensureDir(dirname(final));
      // Read-only is enough for fsync (POSIX fsync needs no write access on Linux).
      staged.push({ fd: openSync(temp, constants.O_RDONLY), temp, final });
      stagedFinals.add(final);
      return relative;
    },
    async flush() {
      const batch = staged;
      staged = [];
      stagedFinals.clear();
      try {
        await Promise.all(batch.map((s) => fsyncAsync(s.fd)));
      } catch (err) {
        // Not durable, so never renamed into place, and not left behind either.
        await Promise.all(batch.map((s) => closeAsync(s.fd).catch(() => undefined)));
        for (const s of batch) removeTemp(s, false);
        throw err;
      }
      await Promise.all(batch.map((s) => closeAsync(s.fd)));
      for (const s of batch) {
        renameSync(s.temp, s.final);
        touchedDirs.add(dirname(s.final));
      }
      const dirs = [...touchedDirs];
      touchedDirs.clear();
      await Promise.all(dirs.map(fsyncDir));
    },
    discard() {
      const batch = staged;
      staged = [];
      stagedFinals.clear();
      for (const s of batch) removeTemp(s, true);
    },
  };
}
