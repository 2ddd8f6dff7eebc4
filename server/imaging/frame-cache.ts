/**
 * Decoded frames in memory, least recently used first out, bounded by bytes: a viewer scrolls
 * back and forth through a series, and decoding (JPEG 2000 especially) costs far more than RAM.
 * Concurrent requests for the same frame share one decode.
 */
import type { DecodedFrame } from '#server/dicom/pixel-types.ts';
import { createStoredFiles, type StoredFiles } from '#server/imaging/stored-files.ts';

export const DEFAULT_FRAME_CACHE_BYTES = 256 * 1024 * 1024;

export type FrameCache = {
  get(key: string, decode: () => Promise<DecodedFrame>): Promise<DecodedFrame>;
  readonly bytes: number;
  /** The stored files frames are decoded from (stored-files.ts). */
  readonly files: StoredFiles;
};

export function createFrameCache(maxBytes = DEFAULT_FRAME_CACHE_BYTES, files: StoredFiles = createStoredFiles()): FrameCache {
  const entries = new Map<string, DecodedFrame>();
  const pending = new Map<string, Promise<DecodedFrame>>();
  let bytes = 0;

  const insert = (key: string, frame: DecodedFrame): void => {
    const size = frame.pixels.byteLength;
    // A frame bigger than the whole cache is served but not kept.
    if (size > maxBytes) return;
    entries.set(key, frame);
    bytes += size;
    for (const [oldKey, old] of entries) {
      if (bytes <= maxBytes) break;
      entries.delete(oldKey);
      bytes -= old.pixels.byteLength;
    }
  };

  return {
    files,
    get bytes() {
      return bytes;
    },
    async get(key, decode) {
      const hit = entries.get(key);
      if (hit) {
        // Map order is insertion order: re-inserting marks the entry most recently used.
        entries.delete(key);
        entries.set(key, hit);
        return hit;
      }
      const inFlight = pending.get(key);
      if (inFlight) return inFlight;
      const decoding = decode().then(
        (frame) => {
          pending.delete(key);
          insert(key, frame);
          return frame;
        },
        (err: unknown) => {
          pending.delete(key);
          throw err;
        },
      );
      pending.set(key, decoding);
      return decoding;
    },
  };
}
