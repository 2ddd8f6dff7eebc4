/**
 * The API key format: `mia_` + 43 base62 characters of randomness (256 bits) + 6 base62
 * characters of CRC-32 over them. The prefix lets secret scanners and humans recognise a mia
 * key; the checksum rejects typos and truncations without touching the database.
 * Only the SHA-256 digest is stored; a fast hash is enough because the key has full entropy.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';
const PREFIX = 'mia_';
const BODY_LENGTH = 43;
const CHECKSUM_LENGTH = 6;
export const KEY_LENGTH = PREFIX.length + BODY_LENGTH + CHECKSUM_LENGTH;
/** What lists and logs may show of a key: enough to tell keys apart, too little to use. */
const DISPLAY_LENGTH = PREFIX.length + 6;

export type KeyDigest = string & { readonly __brand: 'KeyDigest' };

function toBase62(value: bigint, length: number): string {
  let out = '';
  let rest = value;
  for (let i = 0; i < length; i += 1) {
    out = ALPHABET[Number(rest % 62n)] + out;
    rest /= 62n;
  }
  return out;
}

const CRC_TABLE = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k += 1) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});

function crc32(text: string): number {
  let crc = 0xffffffff;
  for (let i = 0; i < text.length; i += 1) crc = (CRC_TABLE[(crc ^ text.charCodeAt(i)) & 0xff] ?? 0) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

function checksumOf(body: string): string {
  return toBase62(BigInt(crc32(body)), CHECKSUM_LENGTH);
}

export function generateKey(): string {
  // 256 random bits as a 43-digit base62 number (62^43 > 2^256).
  const body = toBase62(BigInt('0x' + randomBytes(32).toString('hex')), BODY_LENGTH);
  return PREFIX + body + checksumOf(body);
}

export type KeyShapeProblem = 'wrong length or prefix' | 'invalid characters' | 'checksum mismatch';

/** Checks a presented key's shape; returns the problem, or undefined when it is well-formed. */
export function keyShapeProblem(key: string): KeyShapeProblem | undefined {
  if (key.length !== KEY_LENGTH || !key.startsWith(PREFIX)) return 'wrong length or prefix';
  const rest = key.slice(PREFIX.length);
  if (!/^[0-9A-Za-z]+$/.test(rest)) return 'invalid characters';
  const body = rest.slice(0, BODY_LENGTH);
  return checksumOf(body) === rest.slice(BODY_LENGTH) ? undefined : 'checksum mismatch';
}

export function digestKey(key: string): KeyDigest {
  return createHash('sha256').update(key, 'utf8').digest('hex') as KeyDigest;
}

export function displayPrefix(key: string): string {
  return key.slice(0, DISPLAY_LENGTH);
}

/** Compares two digests in constant time, so response timing says nothing about a near miss. */
export function digestsEqual(a: string, b: string): boolean {
  const left = Buffer.from(a, 'hex');
  const right = Buffer.from(b, 'hex');
  return left.length === right.length && timingSafeEqual(left, right);
}
