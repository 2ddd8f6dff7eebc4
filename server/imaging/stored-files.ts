/**
 * Stored files read for their frames, each read and parsed once however many requests want it at
 * the same moment, and a multi-frame file kept (least recently used first out, bounded by bytes)
 * while its frames are asked for one request each, as a viewer scrolling a cine loop does. Each
 * frame request read its whole file: eight at once of a 500 MB multi-frame image held 3.7-5 GB,
 * and every frame of it cost a 500 MB read (found by a hostile-input probe).
 */
import type { DicomInstance } from '#server/dicom/parse.ts';

export const DEFAULT_STORED_FILE_BYTES = 512 * 1024 * 1024;

export type StoredFile = { bytes: Uint8Array; instance: DicomInstance };

export type StoredFiles = {
  /** `keep`: worth keeping after this request (a file of several frames). */
  get(path: string, keep: boolean, load: () => Promise<StoredFile>): Promise<StoredFile>;
  readonly bytes: number;
};

export function createStoredFiles(maxBytes = DEFAULT_STORED_FILE_BYTES): StoredFiles {
  const entries = new Map<string, StoredFile>();
  const pending = new Map<string, Promise<StoredFile>>();
  let bytes = 0;

  const insert = (path: string, file: StoredFile): void => {
    const size = file.bytes.byteLength;
    if (size > maxBytes) return;
    entries.set(path, file);
    bytes += size;
    // Few entries (files of many frames each): a walk from the oldest costs nothing.
    for (const [oldPath, old] of entries) {
      if (bytes <= maxBytes) break;
      entries.delete(oldPath);
      bytes -= old.bytes.byteLength;
    }
  };

  return {
    get bytes() {
      return bytes;
    },
    async get(path, keep, load) {
      const hit = entries.get(path);
      if (hit) {
        entries.delete(path);
        entries.set(path, hit);
        return hit;
      }
      const inFlight = pending.get(path);
      if (inFlight) return inFlight;
      const loading = load().then(
        (file) => {
          pending.delete(path);
          if (keep) insert(path, file);
          return file;
        },
        (err: unknown) => {
          pending.delete(path);
          throw err;
        },
      );
      pending.set(path, loading);
      return loading;
    },
  };
}
