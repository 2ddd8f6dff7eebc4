/**
 * What a mia process killed mid-import leaves in its data folder: temporary archive files and
 * spooled uploads (whole DICOM files, patient data included) and import jobs still `running` for
 * an owner that is gone. Every mia process that opens the folder clears them (data-folder.ts),
 * so they never wait for a server to start.
 *
 * Another live process may be writing into the same folder right now (a CLI import beside a
 * server), so a file is removed only when no live process owns it. Its name carries its
 * writer's pid, and the file goes once that pid is no longer alive. A pid can be reused by an
 * unrelated process, which would keep a dead writer's file for as long as that one lives, so a
 * file untouched for STALE_AGE_MS goes whatever its name says: a live writer renames or removes
 * its temporary files within one batch (seconds; minutes for batches of very large files) and
 * writes to an upload it receives continuously. A pid is checked rather than a start token
 * stored beside it because checking a token needs the live process's own (per-OS) start time.
 */
import { lstatSync, mkdirSync, readdirSync, rmSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { exportPartialWriterPid, exportsDir, isExportPartialName } from '#server/exports/exports.ts';
import { ARCHIVE_DIR, STAGING_DIR, isArchiveTempName, isStagingShard, tempWriterPid } from '#server/imports/archive.ts';
import { interruptAbandonedJobs, type ImportJobDeps } from '#server/imports/import-job.ts';
import { pidAlive } from '#server/jobs/jobs.ts';
import { UPLOADS_DIR, uploadReceiverPid } from '#server/imports/upload.ts';
import { PRIVATE_DIR_MODE } from '#server/private-files.ts';

/** Far beyond any batch's life; short enough that a pid reused by another program keeps patient data on disk for hours, not for ever. */
export const STALE_AGE_MS = 6 * 60 * 60 * 1000;

export type Leftovers = { files: number; bytes: number; jobs: number; failed: number };

function errorCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
}

function entries(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch (err) {
    if (errorCode(err) === 'ENOENT') return [];
    throw err;
  }
}

/** Our own files are alive by definition: this process may open the folder a second time. */
function writerAlive(pid: number): boolean {
  return pid === process.pid || pidAlive(pid);
}

function isStale(pid: number | null, newestMs: number): boolean {
  if (pid !== null && !writerAlive(pid)) return true;
  return Date.now() - newestMs > STALE_AGE_MS;
}

type Found = { path: string; stat: Stats };

function statOf(path: string): Found | undefined {
  try {
    return { path, stat: lstatSync(path) };
  } catch (err) {
    // Renamed into place or removed by its writer (or another cleaner) since the listing.
    if (errorCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

function remove(found: Found, bytes: number, tally: Leftovers): void {
  try {
    rmSync(found.path, { recursive: true, force: true });
    tally.files += 1;
    tally.bytes += bytes;
  } catch {
    // Left for the next start; a folder that cannot be cleaned must still open.
    tally.failed += 1;
  }
}

function clearStaging(dataDir: string, tally: Leftovers, writer: WriterOf): void {
  const staging = join(dataDir, STAGING_DIR);
  const clear = (dir: string): void => {
    for (const name of entries(dir)) {
      const found = statOf(join(dir, name));
      if (!found) continue;
      // Staged files are spread over folders of their own (archive.ts); the folders stay.
      if (dir === staging && isStagingShard(name) && found.stat.isDirectory()) clear(found.path);
      else if (isStale(writer(tempWriterPid(name)), found.stat.mtimeMs)) remove(found, found.stat.size, tally);
    }
  };
  clear(staging);
}

/**
 * Archives written before the staging folder existed kept temporary files beside the stored
 * ones. Listing every archive folder costs about a second per million files, so it happens
 * once: the staging folder, created after the sweep, says it is done.
 */
function sweepArchiveOnce(dataDir: string, tally: Leftovers, writer: WriterOf): void {
  const staging = join(dataDir, STAGING_DIR);
  if (statOf(staging)) return;
  const archive = join(dataDir, ARCHIVE_DIR);
  for (const shard of entries(archive)) {
    if (shard.startsWith('.')) continue;
    const dir = join(archive, shard);
    if (!statOf(dir)?.stat.isDirectory()) continue;
    for (const name of entries(dir)) {
      if (!isArchiveTempName(name)) continue;
      const found = statOf(join(dir, name));
      if (found && isStale(writer(tempWriterPid(name)), found.stat.mtimeMs)) remove(found, found.stat.size, tally);
    }
  }
  mkdirSync(staging, { recursive: true, mode: PRIVATE_DIR_MODE });
}

function clearUploads(dataDir: string, tally: Leftovers, writer: WriterOf): void {
  const uploads = join(dataDir, UPLOADS_DIR);
  for (const name of entries(uploads)) {
    const found = statOf(join(uploads, name));
    if (!found) continue;
    // A folder's own mtime moves only when a part is added: its newest part tells when the
    // receiver last wrote.
    const parts = found.stat.isDirectory() ? entries(found.path).flatMap((part) => statOf(join(found.path, part)) ?? []) : [found];
    const newest = Math.max(found.stat.mtimeMs, ...parts.map((p) => p.stat.mtimeMs));
    const bytes = parts.reduce((sum, p) => sum + p.stat.size, 0);
    if (isStale(writer(uploadReceiverPid(name)), newest)) remove(found, bytes, tally);
  }
}

/** An export being written is patient data too, until it is renamed into place. */
function clearExportPartials(dataDir: string, tally: Leftovers, writer: WriterOf): void {
  const dir = exportsDir(dataDir);
  for (const name of entries(dir)) {
    if (!isExportPartialName(name)) continue;
    const found = statOf(join(dir, name));
    if (found && isStale(writer(exportPartialWriterPid(name)), found.stat.mtimeMs)) remove(found, found.stat.size, tally);
  }
}

/** The pid a temporary file's name gives, where that pid can be probed from here. */
type WriterOf = (pid: number | null) => number | null;

/**
 * Removes what dead processes left; never throws for a file it could not remove (counted in
 * `failed`). A hub's nodes share the folder from several hosts (`sharedFolder`), where a pid in a
 * file's name may be another host's: there a file goes by its age alone.
 */
export async function clearCrashLeftovers(deps: ImportJobDeps & { sharedFolder?: boolean }): Promise<Leftovers> {
  const writer: WriterOf = (pid) => (deps.sharedFolder ? null : pid);
  const tally: Leftovers = { files: 0, bytes: 0, jobs: 0, failed: 0 };
  sweepArchiveOnce(deps.dataDir, tally, writer);
  clearStaging(deps.dataDir, tally, writer);
  clearUploads(deps.dataDir, tally, writer);
  clearExportPartials(deps.dataDir, tally, writer);
  tally.jobs = await interruptAbandonedJobs(deps);
  if (tally.files + tally.jobs + tally.failed > 0) deps.log?.info('leftovers.cleared', { ...tally });
  return tally;
}
