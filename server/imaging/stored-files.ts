/**
 * Stored files read for their frames, each read and parsed once however many requests want it at
 * the same moment, and a multi-frame file kept (least recently used first out, bounded by bytes)
 * while its frames are asked for one request each, as a viewer scrolling a cine loop does. Each
 * frame request read its whole file: eight at once of a 500 MB multi-frame image held 3.7-5 GB,
 * and every frame of it cost a 500 MB read (found by a hostile-input probe).
 */
import type { DicomInstance } from '#server/dicom/parse.ts';
import { createSharedLru } from '#server/imaging/shared-lru.ts';

export const DEFAULT_STORED_FILE_BYTES = 512 * 1024 * 1024;

export type StoredFile = { bytes: Uint8Array; instance: DicomInstance };

export type StoredFiles = {
  /** `keep`: worth keeping after this request (a file of several frames). */
  get(path: string, keep: boolean, load: () => Promise<StoredFile>): Promise<StoredFile>;
  readonly bytes: number;
};

export function createStoredFiles(maxBytes = DEFAULT_STORED_FILE_BYTES): StoredFiles {
  const files = createSharedLru<StoredFile>(maxBytes, (file) => file.bytes.byteLength);
  return {
    get bytes() {
      return files.bytes;
    },
    get: (path, keep, load) => files.get(path, load, keep),
  };
}
