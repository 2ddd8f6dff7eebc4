/**
 * Turns an Authorization header into an authenticated caller, or a reason for 401. The shape
 * and checksum are checked before the database is touched; the digest is then looked up and
 * compared in constant time. The key itself never leaves this function.
 */
import { z } from 'zod';
import type { Role, Scope } from '#common/vocabulary.ts';
import { GRANTABLE_SCOPES } from '#common/vocabulary.ts';
import type { Clock } from '#server/clock.ts';
import type { Database } from '#server/store/database.ts';
import { touchApiKey } from '#server/store/api-keys.ts';
import { findKnownApiKey } from '#server/auth/known-keys.ts';
import { findDeviceByDigest, touchDevice, type DeviceRow } from '#server/store/devices.ts';
import { digestKey, digestsEqual, keyShapeProblem } from '#server/auth/key-format.ts';
import { effectiveScopes } from '#server/auth/scopes.ts';

export type AuthContext = {
  keyRef: number;
  keyId: string;
  userRef: number;
  userId: string;
  email: string;
  /** A device key's caller is a workstation, not a person (docs/sync.md, Devices). */
  role: Role | 'device';
  scopes: Scope[];
  /** The enrolled device a device key is bound to; null for a person's key. */
  device: { ref: number; id: string } | null;
  /** The key was rotated and works only for the rest of its grace period (spec 5.3). */
  keyRotated: boolean;
};

export type AuthOutcome =
  | { ok: true; auth: AuthContext }
  | { ok: false; reason: string; keyId: string | null; userId: string | null };

export const extraScopesSchema = z.array(z.enum(GRANTABLE_SCOPES));

/** last_used_at is informational; writing it at most once a minute keeps reads read-only. */
const TOUCH_INTERVAL_MS = 60_000;

/** The key presented in `Authorization: Bearer <key>` (scheme case-insensitive, RFC 7235), or null. */
export function bearerToken(header: string | undefined): string | null {
  const match = header ? /^Bearer[ ]+(\S+)\s*$/i.exec(header) : null;
  return match?.[1] ?? null;
}

export async function authenticate(db: Database, clock: Clock, header: string | undefined): Promise<AuthOutcome> {
  const fail = (reason: string, keyId: string | null = null, userId: string | null = null): AuthOutcome => ({
    ok: false,
    reason,
    keyId,
    userId,
  });
  if (!header) return fail('no Authorization header; send Authorization: Bearer <API key>');
  const presented = bearerToken(header);
  if (!presented) return fail('Authorization header must be: Bearer <API key>');
  const problem = keyShapeProblem(presented);
  if (problem) return fail(`malformed API key (${problem})`);

  const digest = digestKey(presented);
  const found = await findKnownApiKey(db, digest);
  if (!found) {
    const device = await findDeviceByDigest(db, digest);
    if (device && digestsEqual(device.key_digest, digest)) return await authenticateDevice(db, clock, device);
  }
  if (!found || !digestsEqual(found.key.digest, digest)) return fail('unknown API key');
  const { key, user } = found;
  const now = clock.now();
  if (key.revoked_at) return fail('API key was revoked', key.public_id, user.public_id);
  if (key.expires_at && Date.parse(key.expires_at) <= now.getTime()) {
    return fail('API key was rotated and its 24-hour grace period has ended', key.public_id, user.public_id);
  }
  if (user.status !== 'active') return fail('the user of this API key is disabled', key.public_id, user.public_id);

  if (!key.last_used_at || now.getTime() - Date.parse(key.last_used_at) > TOUCH_INTERVAL_MS) {
    try {
      await touchApiKey(db, key.id, now.toISOString());
    } catch {
      // A full or failing disk refuses the write: the key is still valid and its reads must
      // still work; last_used_at catches up with a later request.
    }
  }
  const extra = extraScopesSchema.parse(JSON.parse(key.extra_scopes));
  return {
    ok: true,
    auth: {
      keyRef: key.id,
      keyId: key.public_id,
      userRef: user.id,
      userId: user.public_id,
      email: user.email,
      role: user.role,
      scopes: effectiveScopes(user.role, extra),
      keyRotated: key.expires_at !== null,
      device: null,
    },
  };
}

/** The scopes of every device key: it syncs, and can do nothing else. */
export const DEVICE_SCOPES: readonly Scope[] = ['sync:push', 'sync:pull'];

async function authenticateDevice(db: Database, clock: Clock, device: DeviceRow): Promise<AuthOutcome> {
  if (device.revoked_at) return { ok: false, reason: 'device was revoked on the hub; enroll it again', keyId: device.key_public_id, userId: null };
  const now = clock.now();
  if (!device.last_seen_at || now.getTime() - Date.parse(device.last_seen_at) > TOUCH_INTERVAL_MS) {
    try {
      await touchDevice(db, device.id, now.toISOString());
    } catch {
      // As for keys: last seen is informational and catches up later.
    }
  }
  return {
    ok: true,
    auth: {
      keyRef: 0,
      keyId: device.key_public_id,
      userRef: 0,
      userId: `device:${device.device_id}`,
      email: device.name,
      role: 'device',
      scopes: [...DEVICE_SCOPES],
      keyRotated: false,
      device: { ref: device.id, id: device.device_id },
    },
  };
}
