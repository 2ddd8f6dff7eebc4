/**
 * UIDs derived from names: 2.25.<decimal of a 128-bit UUID> (PS3.5 B.2), the UUID made from the
 * SHA-256 of the name with the version and variant bits of an RFC 9562 version 8 (custom) UUID.
 * The same name always gives the same UID, so an object written twice from the same content is
 * the same instance, and no UID root needs registering.
 */
import { createHash } from 'node:crypto';

/** `parts` are joined unambiguously (each length-prefixed) before hashing. */
export function hashedUid(...parts: readonly string[]): string {
  const hash = createHash('sha256');
  for (const part of parts) hash.update(`${Buffer.byteLength(part)}:${part};`);
  const uuid = hash.digest().subarray(0, 16);
  uuid[6] = ((uuid[6] ?? 0) & 0x0f) | 0x80;
  uuid[8] = ((uuid[8] ?? 0) & 0x3f) | 0x80;
  return `2.25.${BigInt(`0x${uuid.toString('hex')}`).toString()}`;
}
