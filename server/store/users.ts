/** SQL for users. */
import type { Role, UserStatus } from '#common/vocabulary.ts';
import type { Database } from '#server/store/database.ts';
import { newPublicId } from '#server/store/public-id.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type UserRow = {
  id: number;
  public_id: string;
  email: string;
  name: string | null;
  role: Role;
  status: UserStatus;
  created_at: string;
  updated_at: string;
  /** 'hub': a copy of the hub's user, replaced by each sync (migration 19). */
  origin: 'local' | 'hub';
  disabled_at: string | null;
};

export async function insertUser(
  db: Database,
  input: { email: string; name: string | null; role: Role; at: string },
): Promise<UserRow> {
  return (await db.get(`INSERT INTO users (public_id, email, name, role, status, created_at, updated_at)
       VALUES (?, ?, ?, ?, 'active', ?, ?) RETURNING *`, [newPublicId('usr'), input.email, input.name, input.role, input.at, input.at])) as UserRow;
}

export async function findUserByPublicId(db: Database, publicId: string): Promise<UserRow | undefined> {
  return (await db.get('SELECT * FROM users WHERE public_id = ?', [publicId])) as UserRow | undefined;
}

export async function findUserById(db: Database, id: number): Promise<UserRow | undefined> {
  return (await db.get('SELECT * FROM users WHERE id = ?', [id])) as UserRow | undefined;
}

export async function findUserByEmail(db: Database, email: string): Promise<UserRow | undefined> {
  return (await db.get('SELECT * FROM users WHERE email = ?', [email])) as UserRow | undefined;
}

export async function listUsers(
  db: Database,
  filter: { role?: Role | undefined; status?: UserStatus | undefined },
  page: PageRequest,
): Promise<Page<UserRow>> {
  const rows = (await db.all(`SELECT * FROM users
       WHERE id > @after AND (CAST(@role AS TEXT) IS NULL OR role = @role) AND (CAST(@status AS TEXT) IS NULL OR status = @status)
       ORDER BY id LIMIT @limit`, { after: page.afterId, role: filter.role ?? null, status: filter.status ?? null, limit: page.limit + 1 })) as UserRow[];
  return toPage(rows, page.limit);
}

export async function updateUser(
  db: Database,
  id: number,
  patch: { name?: string | null | undefined; role?: Role | undefined; status?: UserStatus | undefined; at: string },
): Promise<UserRow> {
  return (await db.get(`UPDATE users SET
         name = CASE WHEN @setName THEN @name ELSE name END,
         role = COALESCE(@role, role),
         status = COALESCE(@status, status),
         disabled_at = CASE WHEN @status = 'disabled' AND status <> 'disabled' THEN @at
                            WHEN @status = 'active' THEN NULL ELSE disabled_at END,
         updated_at = @at
       WHERE id = @id RETURNING *`, {
      id,
      setName: patch.name === undefined ? 0 : 1,
      name: patch.name ?? null,
      role: patch.role ?? null,
      status: patch.status ?? null,
      at: patch.at,
    })) as UserRow;
}

export async function countActiveAdmins(db: Database): Promise<number> {
  const row = (await db.get(`SELECT count(*) AS n FROM users WHERE role = 'admin' AND status = 'active'`)) as { n: number };
  return row.n;
}

/** Every user, for the hub's directory; a hospital has hundreds, not millions. */
export async function listAllUsers(db: Database): Promise<UserRow[]> {
  return (await db.all('SELECT * FROM users ORDER BY id')) as UserRow[];
}

export type HubUser = { public_id: string; email: string; name: string | null; role: Role; status: UserStatus; disabled_at: string | null; created_at: string; updated_at: string };

/** Inserts or replaces the local copy of a hub user, by public id; returns its local id. */
export async function upsertHubUser(db: Database, u: HubUser): Promise<number> {
  const row = (await db.get(`INSERT INTO users (public_id, email, name, role, status, disabled_at, created_at, updated_at, origin)
       VALUES (@public_id, @email, @name, @role, @status, @disabled_at, @created_at, @updated_at, 'hub')
       ON CONFLICT (public_id) DO UPDATE SET email = excluded.email, name = excluded.name, role = excluded.role, status = excluded.status,
         disabled_at = excluded.disabled_at, updated_at = excluded.updated_at, origin = 'hub'
       RETURNING id`, u)) as { id: number };
  return row.id;
}

/**
 * A local user becomes the hub's user of the same email: the row keeps its local id (so its
 * reports and keys stay theirs) and takes the hub's public id, name, role and status.
 */
export async function adoptHubUser(db: Database, localId: number, u: HubUser): Promise<void> {
  await db.run(`UPDATE users SET public_id = @public_id, email = @email, name = @name, role = @role, status = @status, disabled_at = @disabled_at,
       updated_at = @updated_at, origin = 'hub' WHERE id = @id`, { ...u, id: localId });
}

/** A hub user's old copy lets go of an email the hub has given to another of its users. */
export async function releaseEmail(db: Database, id: number, publicId: string): Promise<void> {
  await db.run('UPDATE users SET email = ? WHERE id = ?', [`${publicId}@moved.invalid`, id]);
}
