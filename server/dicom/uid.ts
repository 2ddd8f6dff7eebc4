/**
 * UIDs become a branded type once, at the parse edge, so code further in can trust that a
 * `Uid` is syntactically valid (PS3.5 9.1: digits and dots, at most 64 characters).
 */
import { trimPadding } from '#server/dicom/values.ts';

export type Uid = string & { readonly __brand: 'Uid' };

export type UidResult = { ok: true; uid: Uid } | { ok: false; reason: string };

const UID_SHAPE = /^[0-9]+(\.[0-9]+)*$/;

/**
 * Parses a UID value as read from a data set.
 *
 * Leniency, on purpose: PS3.5 9.1 forbids leading zeros in a component ("1.02"), but
 * equipment from several vendors wrote them for years and refusing such files would make
 * whole studies unreadable; we accept them unchanged. Trailing NUL or space padding
 * (PS3.5 6.2: UI values are padded with NUL, some writers use space) is stripped.
 * Anything else (letters, empty components, more than 64 characters) is refused.
 */
export function parseUid(raw: string): UidResult {
  const value = trimPadding(raw).replace(/^ +/, '');
  if (value.length === 0) return { ok: false, reason: 'empty UID' };
  if (value.length > 64) return { ok: false, reason: `UID longer than 64 characters: ${value.slice(0, 80)}` };
  if (!UID_SHAPE.test(value)) return { ok: false, reason: `UID is not digits and dots: ${JSON.stringify(value)}` };
  return { ok: true, uid: value as Uid };
}

/** True when the UID also meets the stricter no-leading-zero rule of PS3.5 9.1. */
export function isStrictUid(uid: Uid): boolean {
  return uid.split('.').every((c) => c === '0' || !c.startsWith('0'));
}
