/**
 * Stored files read for their frames, each read and parsed once however many requests want it at
 * the same moment, and a multi-frame file kept (least recently used first out, bounded by bytes)
 * while its frames are asked for one request each, as a viewer scrolling a cine loop does. Each
 * frame request read its whole file: eight at once of a 500 MB multi-frame image held 3.7-5 GB,
 * and every frame of it cost a 500 MB read (found by a hostile-input probe).
 */
import type { DicomInstance } from '#server/dicom/parse.ts';
import { createSharedLru, type SharedLru } from '#server/imaging/shared-lru.ts';

export const DEFAULT_STORED_FILE_BYTES = 512 * 1024 * 1024;

export type StoredFile = { bytes: Uint8Array; instance: DicomInstance };

/** get(path, load, keep): `keep` when worth keeping after this request (a file of several frames). */
export type StoredFiles = SharedLru<StoredFile>;

export function createStoredFiles(maxBytes = DEFAULT_STORED_FILE_BYTES): StoredFiles {
  return createSharedLru<StoredFile>(maxBytes, (file) => file.bytes.byteLength);
}
