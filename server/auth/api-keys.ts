/**
 * Issuing, listing, rotating and revoking API keys (spec 5). A user manages their own keys; an
 * admin manages anyone's and may grant extra scopes. Rotation keeps the old key working for
 * 24 hours (spec 5.3) so running integrations can switch over; revocation is immediate.
 */
import { mapInOrder } from '#server/in-order.ts';
import type { GrantableScope, Role } from '#common/vocabulary.ts';
import type { ApiKey } from '#server/api/schemas.ts';
import type { AuthContext } from '#server/auth/authenticate.ts';
import { extraScopesSchema } from '#server/auth/authenticate.ts';
import { digestKey, displayPrefix, generateKey } from '#server/auth/key-format.ts';
import { effectiveScopes, holdsScope } from '#server/auth/scopes.ts';
import type { Clock } from '#server/clock.ts';
import { conflict, forbidden, notFound } from '#server/errors.ts';
import type { Database } from '#server/store/database.ts';
import { inTransaction } from '#server/store/database.ts';
import type { ApiKeyRow, ApiKeyWithOwner } from '#server/store/api-keys.ts';
import {
  findApiKeyById,
  findApiKeyByPublicId,
  insertApiKey,
  listApiKeys,
  markApiKeyRotated,
  revokeApiKey,
} from '#server/store/api-keys.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import { findUserById, findUserByPublicId } from '#server/store/users.ts';

export const ROTATION_GRACE_MS = 24 * 60 * 60 * 1000;

export type KeyDeps = { db: Database; clock: Clock };

function keyStatus(row: ApiKeyRow, now: Date): ApiKey['status'] {
  if (row.revoked_at) return 'revoked';
  if (row.expires_at) return Date.parse(row.expires_at) <= now.getTime() ? 'expired' : 'expiring';
  return 'active';
}

export async function toApiKey(deps: KeyDeps, row: ApiKeyWithOwner, role: Role): Promise<ApiKey> {
  const extra = extraScopesSchema.parse(JSON.parse(row.extra_scopes));
  const replacedBy = row.replaced_by === null ? null : ((await findApiKeyById(deps.db, row.replaced_by))?.public_id ?? null);
  return {
    id: row.public_id,
    user_id: row.user_public_id,
    name: row.name,
    prefix: row.prefix,
    scopes: effectiveScopes(role, extra),
    extra_scopes: extra,
    status: keyStatus(row, deps.clock.now()),
    created_at: row.created_at,
    last_used_at: row.last_used_at,
    expires_at: row.expires_at,
    revoked_at: row.revoked_at,
    replaced_by: replacedBy,
  };
}

const isAdmin = (caller: AuthContext): boolean => holdsScope(caller.scopes, 'manage:users');

async function roleOf(deps: KeyDeps, userRef: number): Promise<Role> {
  const user = await findUserById(deps.db, userRef);
  if (!user) throw new Error(`key owner ${userRef} missing`);
  return user.role;
}

/** Issues a key for a user; used by the API (through issueKey) and by the CLI directly. */
export async function issueKeyForUser(
  deps: KeyDeps,
  input: { userRef: number; name: string | null; extraScopes: readonly GrantableScope[] },
): Promise<{ row: ApiKeyWithOwner; key: string }> {
  // A key made here for the hub's user would let this workstation act as them in changes the
  // hub takes as theirs: only the hub issues their keys (they come down with each sync).
  const owner = await findUserById(deps.db, input.userRef);
  if (owner?.origin === 'hub') {
    throw conflict('This user is managed by the hub', `keys for ${owner.email} are issued on the hospital's hub and reach this workstation at its next sync`);
  }
  const key = generateKey();
  const inserted = await insertApiKey(deps.db, {
    userId: input.userRef,
    name: input.name,
    digest: digestKey(key),
    prefix: displayPrefix(key),
    extraScopes: [...new Set(input.extraScopes)],
    at: deps.clock.now().toISOString(),
  });
  const row = await findApiKeyById(deps.db, inserted.id);
  if (!row) throw new Error('inserted key vanished');
  return { row, key };
}

export async function issueKey(
  deps: KeyDeps,
  caller: AuthContext,
  input: { userId?: string | undefined; name?: string | undefined; scopes?: readonly GrantableScope[] | undefined },
): Promise<{ apiKey: ApiKey; key: string }> {
  const forOther = input.userId !== undefined && input.userId !== caller.userId;
  if (forOther && !isAdmin(caller)) {
    throw forbidden('No permission to create keys for other users', 'required scope: manage:users');
  }
  if (input.scopes && input.scopes.length > 0 && !isAdmin(caller)) {
    throw forbidden('No permission to grant extra scopes', 'required scope: manage:users');
  }
  const owner = forOther ? await findUserByPublicId(deps.db, input.userId ?? '') : await findUserById(deps.db, caller.userRef);
  if (!owner) throw notFound('User', input.userId ?? caller.userId);
  if (owner.status !== 'active') throw conflict('User is disabled', `enable user ${owner.public_id} first`);
  const { row, key } = await issueKeyForUser(deps, { userRef: owner.id, name: input.name ?? null, extraScopes: input.scopes ?? [] });
  return { apiKey: await toApiKey(deps, row, owner.role), key };
}

/** A key the caller may manage: their own, or any key for an admin. Others' keys are 404 so
 * key ids cannot be probed. */
async function manageableKey(deps: KeyDeps, caller: AuthContext, keyId: string): Promise<ApiKeyWithOwner> {
  const row = await findApiKeyByPublicId(deps.db, keyId);
  if (!row || (row.user_id !== caller.userRef && !isAdmin(caller))) throw notFound('API key', keyId);
  return row;
}

export async function listKeys(
  deps: KeyDeps,
  caller: AuthContext,
  filter: { userId?: string | undefined },
  page: PageRequest,
): Promise<Page<ApiKey>> {
  let userRef: number | undefined = caller.userRef;
  if (isAdmin(caller)) {
    userRef = filter.userId === undefined ? undefined : ((await findUserByPublicId(deps.db, filter.userId))?.id ?? -1);
  } else if (filter.userId !== undefined && filter.userId !== caller.userId) {
    throw forbidden("No permission to list other users' keys", 'required scope: manage:users');
  }
  const rows = await listApiKeys(deps.db, { userId: userRef }, page);
  return { items: await mapInOrder(rows.items, async (row) => await toApiKey(deps, row, await roleOf(deps, row.user_id))), nextAfterId: rows.nextAfterId };
}

export async function rotateKey(
  deps: KeyDeps,
  caller: AuthContext,
  keyId: string,
): Promise<{ apiKey: ApiKey; key: string; previous: { id: string; expiresAt: string } }> {
  return await inTransaction(deps.db, async (tx) => {
    const old = await manageableKey({ ...deps, db: tx }, caller, keyId);
    refuseHubKey(old);
    const status = keyStatus(old, deps.clock.now());
    if (status !== 'active') {
      throw conflict(`API key is ${status}`, 'only an active key can be rotated; create a new key instead');
    }
    const extra = extraScopesSchema.parse(JSON.parse(old.extra_scopes));
    const { row, key } = await issueKeyForUser({ ...deps, db: tx }, { userRef: old.user_id, name: old.name, extraScopes: extra });
    const expiresAt = new Date(deps.clock.now().getTime() + ROTATION_GRACE_MS).toISOString();
    await markApiKeyRotated(tx, old.id, expiresAt, row.id);
    return { apiKey: await toApiKey({ ...deps, db: tx }, row, await roleOf({ ...deps, db: tx }, row.user_id)), key, previous: { id: old.public_id, expiresAt } };
  });
}

/** A key the hub issued is the hub's to rotate or revoke; here it would come back at the next sync. */
function refuseHubKey(row: ApiKeyWithOwner): void {
  if (row.origin === 'hub') throw conflict('This key is managed by the hub', `key ${row.public_id} was issued on the hospital's hub; rotate or revoke it there`);
}

export async function revokeKey(deps: KeyDeps, caller: AuthContext, keyId: string): Promise<ApiKey> {
  const row = await manageableKey(deps, caller, keyId);
  refuseHubKey(row);
  await revokeApiKey(deps.db, row.id, deps.clock.now().toISOString());
  const updated = await findApiKeyById(deps.db, row.id);
  if (!updated) throw new Error('revoked key vanished');
  return await toApiKey(deps, updated, await roleOf(deps, row.user_id));
}
