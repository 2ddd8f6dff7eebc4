/** User accounts (PRODUCT.md: id, email, role, status). Users are disabled, never deleted, so
 * the audit trail keeps naming who did what. */
import type { Role, UserStatus } from '#common/vocabulary.ts';
import type { User } from '#server/api/schemas.ts';
import type { Clock } from '#server/clock.ts';
import { conflict, notFound } from '#server/errors.ts';
import type { Database } from '#server/store/database.ts';
import { inTransaction } from '#server/store/database.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import type { UserRow } from '#server/store/users.ts';
import {
  countActiveAdmins,
  findUserByEmail,
  findUserByPublicId,
  insertUser,
  listUsers as listUserRows,
  updateUser as updateUserRow,
} from '#server/store/users.ts';

export type UserDeps = { db: Database; clock: Clock };

export function toUser(row: UserRow): User {
  return {
    id: row.public_id,
    email: row.email,
    name: row.name,
    role: row.role,
    status: row.status,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export async function createUser(deps: UserDeps, input: { email: string; role: Role; name?: string | undefined }): Promise<UserRow> {
  return await inTransaction(deps.db, async (tx) => {
    if (await findUserByEmail(tx, input.email)) {
      throw conflict('A user with this email exists', `email ${input.email} is taken; use PATCH /v1/users/{id}`);
    }
    return await insertUser(tx, { email: input.email, name: input.name ?? null, role: input.role, at: deps.clock.now().toISOString() });
  });
}

/** The CLI's "create the user if needed": an existing user keeps their role unless it matches. */
export async function findOrCreateUser(deps: UserDeps, input: { email: string; role: Role }): Promise<{ user: UserRow; created: boolean }> {
  return await inTransaction(deps.db, async (tx) => {
    const existing = await findUserByEmail(tx, input.email);
    if (existing) {
      if (existing.role !== input.role) {
        throw conflict(`User ${input.email} exists with role ${existing.role}`, 'change the role with PATCH /v1/users/{id} first');
      }
      return { user: existing, created: false };
    }
    return { user: await createUser({ ...deps, db: tx }, input), created: true };
  });
}

export async function getUser(deps: UserDeps, userId: string): Promise<UserRow> {
  const row = await findUserByPublicId(deps.db, userId);
  if (!row) throw notFound('User', userId);
  return row;
}

export async function listUsers(
  deps: UserDeps,
  filter: { role?: Role | undefined; status?: UserStatus | undefined },
  page: PageRequest,
): Promise<Page<UserRow>> {
  return await listUserRows(deps.db, filter, page);
}

export async function updateUser(
  deps: UserDeps,
  userId: string,
  patch: { role?: Role | undefined; status?: UserStatus | undefined; name?: string | null | undefined },
): Promise<UserRow> {
  return await inTransaction(deps.db, async (tx) => {
    const row = await getUser({ ...deps, db: tx }, userId);
    if (row.origin === 'hub') {
      throw conflict('This user is managed by the hub', `user ${row.public_id} comes from the hospital's hub; change their role or status there, and this workstation follows at its next sync`);
    }
    const losesAdmin =
      row.role === 'admin' && row.status === 'active' && ((patch.role && patch.role !== 'admin') || patch.status === 'disabled');
    // Without an active admin nobody could issue keys or manage users any more.
    if (losesAdmin && await countActiveAdmins(tx) <= 1) {
      throw conflict('This is the last active admin', 'make another user admin before demoting or disabling this one');
    }
    return await updateUserRow(tx, row.id, { ...patch, at: deps.clock.now().toISOString() });
  });
}
