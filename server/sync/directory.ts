/**
 * People come down from the hub (docs/sync.md, Users): the hub is authoritative for users, roles
 * and keys, and each round a workstation takes the hub's whole directory (a hospital has
 * hundreds of users, so a snapshot is cheaper and simpler than a change stream of them).
 *
 * - A hub user is kept under the hub's public id, so a change made here names the same person
 *   everywhere. A local user with the same email becomes that hub user: the row keeps its local
 *   id (its reports stay theirs), takes the hub's id, name, role and status, and the changes it
 *   made that have not left yet are re-labelled with the hub's id. Keys made here for them are
 *   revoked: the hub's own keys for them come down in the same directory.
 * - Only the hub issues, rotates and revokes its users' keys (server/auth/api-keys.ts): a key made
 *   on a workstation for a hub user would let that workstation act as them.
 * - Keys come as digests (never the keys), so a reader signs in here, offline too, with the key
 *   the hub gave them; a key revoked or a user disabled on the hub stops working here at the
 *   next round.
 * - Local users the hub does not know stay local. Their verdicts and reports wait on this
 *   workstation until an admin adds them (same email) on the hub.
 */
import { z } from 'zod';
import { ROLES, USER_STATUSES } from '#common/vocabulary.ts';
import type { Database } from '#server/store/database.ts';
import { listAllKeys, revokeLocalKeysOf, upsertHubKey } from '#server/store/api-keys.ts';
import { adoptHubUser, findUserByEmail, findUserByPublicId, listAllUsers, releaseEmail, upsertHubUser } from '#server/store/users.ts';
import { relabelPendingUser } from '#server/store/sync-log.ts';

export const directoryResponse = z.object({
  users: z.array(z.object({
    id: z.string().regex(/^usr_[0-9a-f]{24}$/),
    email: z.string().min(3).max(320),
    name: z.string().max(200).nullable(),
    role: z.enum(ROLES),
    status: z.enum(USER_STATUSES),
    disabled_at: z.string().max(40).nullable(),
    created_at: z.string().max(40),
    updated_at: z.string().max(40),
  })).max(100_000),
  keys: z.array(z.object({
    id: z.string().regex(/^key_[0-9a-f]{24}$/),
    user_id: z.string(),
    name: z.string().max(200).nullable(),
    digest: z.string().regex(/^[0-9a-f]{64}$/),
    prefix: z.string().max(40),
    extra_scopes: z.array(z.string().max(64)).max(50),
    created_at: z.string().max(40),
    expires_at: z.string().max(40).nullable(),
    revoked_at: z.string().max(40).nullable(),
  })).max(1_000_000),
});
export type Directory = z.output<typeof directoryResponse>;

/** The hub's side: its users and their keys' digests. */
export async function readDirectory(db: Database): Promise<Directory> {
  const users = await listAllUsers(db);
  const keys = await listAllKeys(db);
  return {
    users: users.map((u) => ({ id: u.public_id, email: u.email, name: u.name, role: u.role, status: u.status, disabled_at: u.disabled_at, created_at: u.created_at, updated_at: u.updated_at })),
    keys: keys.map((k) => ({
      id: k.public_id,
      user_id: k.user_public_id,
      name: k.name,
      digest: k.digest,
      prefix: k.prefix,
      extra_scopes: JSON.parse(k.extra_scopes) as string[],
      created_at: k.created_at,
      expires_at: k.expires_at,
      revoked_at: k.revoked_at,
    })),
  };
}

/** The workstation's side, in one transaction; returns how many local users became hub users. */
export async function applyDirectory(tx: Database, deviceId: string, d: Directory, at: string): Promise<{ adopted: number }> {
  const refs = new Map<string, number>();
  let adopted = 0;
  for (const u of d.users) {
    const hubUser = { public_id: u.id, email: u.email, name: u.name, role: u.role, status: u.status, disabled_at: u.disabled_at, created_at: u.created_at, updated_at: u.updated_at };
    const known = await findUserByPublicId(tx, u.id);
    const sameEmail = known ? undefined : await findUserByEmail(tx, u.email);
    if (sameEmail && sameEmail.origin === 'local') {
      await adoptHubUser(tx, sameEmail.id, hubUser);
      await relabelPendingUser(tx, deviceId, sameEmail.public_id, u.id);
      // Keys made here before are not the hub's: from now on the person signs in with the key
      // the hub gave them (it comes down below), so no key made on this machine speaks for them.
      await revokeLocalKeysOf(tx, sameEmail.id, at);
      refs.set(u.id, sameEmail.id);
      adopted += 1;
      continue;
    }
    if (sameEmail) {
      // The hub gave this email to another of its users (an address re-used): the old copy
      // lets go of it, and takes its own again if the hub still lists it further on.
      await releaseEmail(tx, sameEmail.id, sameEmail.public_id);
    }
    refs.set(u.id, await upsertHubUser(tx, hubUser));
  }
  for (const k of d.keys) {
    const userRef = refs.get(k.user_id);
    if (userRef === undefined) continue;
    await upsertHubKey(tx, {
      public_id: k.id,
      user_ref: userRef,
      name: k.name,
      digest: k.digest,
      prefix: k.prefix,
      extra_scopes: JSON.stringify(k.extra_scopes),
      created_at: k.created_at,
      expires_at: k.expires_at,
      revoked_at: k.revoked_at,
    });
  }
  return { adopted };
}
