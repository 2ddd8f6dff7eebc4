/**
 * The content-addressed archive: <data>/archive/ab/cd/<sha256>.dcm. A file is written under a
 * temporary name, fsynced, renamed into place, and its directory fsynced (by `flushDirectories`)
 * before the database commit that makes the instance visible, so a crash at any moment leaves at
 * worst an unreferenced file, never a referenced file that is missing or half written.
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, rename, stat, unlink } from 'node:fs/promises';
import { dirname, join } from 'node:path';

export const ARCHIVE_DIR = 'archive';

/** Path of a stored file relative to the data folder (what the instances table keeps). */
export function archivePathFor(sha256: string): string {
  return join(ARCHIVE_DIR, sha256.slice(0, 2), sha256.slice(2, 4), `${sha256}.dcm`);
}

/** Temporary files start with a dot and end in .tmp: never a name the index refers to. */
export function isArchiveTempName(name: string): boolean {
  return name.startsWith('.') && name.endsWith('.tmp');
}

async function fsyncPath(path: string): Promise<void> {
  const handle = await open(path, constants.O_RDONLY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export type ArchiveWriter = {
  /** Stores the bytes under their digest; returns the relative path. Idempotent. */
  store(bytes: Uint8Array, sha256: string): Promise<string>;
  /** Makes every rename since the last call durable: fsync of each touched directory. */
  flushDirectories(): Promise<void>;
};

export function createArchiveWriter(dataDir: string): ArchiveWriter {
  const touched = new Set<string>();
  return {
    async store(bytes, sha256) {
      const relative = archivePathFor(sha256);
      const finalPath = join(dataDir, relative);
      const dir = dirname(finalPath);
      try {
        const existing = await stat(finalPath);
        // Same digest and size: the content is already there, complete (renames are atomic).
        if (existing.size === bytes.byteLength) return relative;
      } catch {
        // Not stored yet.
      }
      const created = await mkdir(dir, { recursive: true });
      // A new directory's own entry lives in its parent: that parent needs an fsync as well.
      if (created !== undefined) {
        touched.add(dirname(created));
        for (let d = dir; d.length >= created.length; d = dirname(d)) touched.add(d);
      }
      const temp = join(dir, `.${sha256.slice(0, 16)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
      const handle = await open(temp, 'wx');
      try {
        await handle.writeFile(bytes);
        await handle.sync();
      } catch (err) {
        await handle.close();
        await unlink(temp).catch(() => undefined);
        throw err;
      }
      await handle.close();
      await rename(temp, finalPath);
      touched.add(dir);
      return relative;
    },
    async flushDirectories() {
      const dirs = [...touched];
      touched.clear();
      await Promise.all(dirs.map((d) => fsyncPath(d)));
    },
  };
}
