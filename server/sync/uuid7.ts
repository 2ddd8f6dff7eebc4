/**
 * UUIDv7 (RFC 9562, 5.7): 48 bits of Unix milliseconds, then random bits. Ids of devices and
 * changes: made on any device without asking anyone, unique without coordination, and in time
 * order, so the indexes that hold them grow at one end.
 */
import { randomFillSync } from 'node:crypto';

/**
 * Random bytes are taken from a pool filled 256 ids at a time, as crypto.randomUUID does: an
 * import makes a few ids a file, and a randomBytes call each was ~10 us (CPU profile of `mia import`,
 * 2,000 files: uuid7 23 ms of the event loop's ~1.1 s).
 */
const POOL_IDS = 256;
const pool = Buffer.alloc(16 * POOL_IDS);
let next = POOL_IDS;

export function uuid7(nowMs: number): string {
  if (next === POOL_IDS) {
    randomFillSync(pool);
    next = 0;
  }
  const bytes = pool.subarray(16 * next, 16 * next + 16);
  next += 1;
  // 48 bits of milliseconds, big-endian; below 2^53, so plain arithmetic is exact.
  let ms = Math.max(0, Math.floor(nowMs));
  for (let i = 5; i >= 0; i--) {
    bytes[i] = ms % 256;
    ms = Math.floor(ms / 256);
  }
  bytes[6] = (bytes[6]! & 0x0f) | 0x70; // version 7
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // variant 10
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export const UUID7_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
