/**
 * Decoded frames in memory, least recently used first out, bounded by bytes: a viewer scrolls
 * back and forth through a series, and decoding (JPEG 2000 especially) costs far more than RAM.
 * Concurrent requests for the same frame share one decode.
 */
import type { DecodedFrame } from '#server/dicom/pixel-types.ts';
import { createSharedLru } from '#server/imaging/shared-lru.ts';
import { createStoredFiles, type StoredFiles } from '#server/imaging/stored-files.ts';

export const DEFAULT_FRAME_CACHE_BYTES = 256 * 1024 * 1024;

export type FrameCache = {
  get(key: string, decode: () => Promise<DecodedFrame>): Promise<DecodedFrame>;
  readonly bytes: number;
  /** The stored files frames are decoded from (stored-files.ts). */
  readonly files: StoredFiles;
};

export function createFrameCache(maxBytes = DEFAULT_FRAME_CACHE_BYTES, files: StoredFiles = createStoredFiles()): FrameCache {
  const frames = createSharedLru<DecodedFrame>(maxBytes, (frame) => frame.pixels.byteLength);
  return {
    files,
    get bytes() {
      return frames.bytes;
    },
    get: (key, decode) => frames.get(key, decode),
  };
}
