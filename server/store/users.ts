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
