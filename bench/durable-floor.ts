/**
 * The durable floor for an importer that keeps its own copy: per file, read it, parse it with
 * dicom-parser, SHA-256 it, write it under a temporary name, fsync, rename into place; 64 files in
 * flight on libuv's pool; the folder fsynced once at the end, so every rename is durable. No
 * index, no duplicate check, no reject rules: whatever mia adds on top of this is bookkeeping.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, openSync, closeSync, fsyncSync } from 'node:fs';
import { open, readFile, rename } from 'node:fs/promises';
import { join } from 'node:path';
import dicomParser from 'dicom-parser';

export type FloorResult = { files: number; bytes: number; seconds: number };

export async function durableFloor(files: readonly string[], dir: string, inFlight = 64): Promise<FloorResult> {
  mkdirSync(dir, { recursive: true });
  let next = 0;
  let bytes = 0;
  const started = performance.now();
  const one = async (file: string, i: number): Promise<void> => {
    const buffer = await readFile(file);
    bytes += buffer.length;
    dicomParser.parseDicom(new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.length));
    const sha256 = createHash('sha256').update(buffer).digest('hex');
    const temp = join(dir, `.${i}.tmp`);
    const handle = await open(temp, 'wx');
    try {
      await handle.writeFile(buffer);
      await handle.sync();
    } finally {
      await handle.close();
    }
    await rename(temp, join(dir, `${sha256}.dcm`));
  };
  await Promise.all(
    Array.from({ length: Math.min(inFlight, files.length) }, async () => {
      while (next < files.length) {
        const i = next++;
        await one(files[i]!, i);
      }
    }),
  );
  const fd = openSync(dir, 'r');
  fsyncSync(fd);
  closeSync(fd);
  return { files: files.length, bytes, seconds: (performance.now() - started) / 1000 };
}
