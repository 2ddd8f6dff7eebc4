/**
 * UUIDv7 (RFC 9562, 5.7): 48 bits of Unix milliseconds, then random bits. Ids of devices and
 * changes: made on any device without asking anyone, unique without coordination, and in time
 * order, so the indexes that hold them grow at one end.
 */
import { randomBytes } from 'node:crypto';

export function uuid7(nowMs: number): string {
  const bytes = randomBytes(16);
  const ms = BigInt(Math.max(0, Math.floor(nowMs)));
  for (let i = 0; i < 6; i++) bytes[i] = Number((ms >> BigInt(8 * (5 - i))) & 0xffn);
  bytes[6] = (bytes[6]! & 0x0f) | 0x70; // version 7
  bytes[8] = (bytes[8]! & 0x3f) | 0x80; // variant 10
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export const UUID7_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
