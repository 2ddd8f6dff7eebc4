/** SQL for users. */
import type { Role, UserStatus } from '#common/vocabulary.ts';
import { sql, type Database } from '#server/store/database.ts';
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

export function insertUser(
  db: Database,
  input: { email: string; name: string | null; role: Role; at: string },
): UserRow {
  return sql(db,
      `INSERT INTO users (public_id, email, name, role, status, created_at, updated_at)
       VALUES (?, ?, ?, ?, 'active', ?, ?) RETURNING *`,
    )
    .get(newPublicId('usr'), input.email, input.name, input.role, input.at, input.at) as UserRow;
}

export function findUserByPublicId(db: Database, publicId: string): UserRow | undefined {
  return sql(db, 'SELECT * FROM users WHERE public_id = ?').get(publicId) as UserRow | undefined;
}

export function findUserById(db: Database, id: number): UserRow | undefined {
  return sql(db, 'SELECT * FROM users WHERE id = ?').get(id) as UserRow | undefined;
}

export function findUserByEmail(db: Database, email: string): UserRow | undefined {
  return sql(db, 'SELECT * FROM users WHERE email = ?').get(email) as UserRow | undefined;
}

export function listUsers(
  db: Database,
  filter: { role?: Role | undefined; status?: UserStatus | undefined },
  page: PageRequest,
): Page<UserRow> {
  const rows = sql(db,
      `SELECT * FROM users
       WHERE id > @after AND (@role IS NULL OR role = @role) AND (@status IS NULL OR status = @status)
       ORDER BY id LIMIT @limit`,
    )
    .all({ after: page.afterId, role: filter.role ?? null, status: filter.status ?? null, limit: page.limit + 1 }) as UserRow[];
  return toPage(rows, page.limit);
}

export function updateUser(
  db: Database,
  id: number,
  patch: { name?: string | null | undefined; role?: Role | undefined; status?: UserStatus | undefined; at: string },
): UserRow {
  return sql(db,
      `UPDATE users SET
         name = CASE WHEN @setName THEN @name ELSE name END,
         role = COALESCE(@role, role),
         status = COALESCE(@status, status),
         updated_at = @at
       WHERE id = @id RETURNING *`,
    )
    .get({
      id,
      setName: patch.name === undefined ? 0 : 1,
      name: patch.name ?? null,
      role: patch.role ?? null,
      status: patch.status ?? null,
      at: patch.at,
    }) as UserRow;
}

export function countActiveAdmins(db: Database): number {
  const row = sql(db, `SELECT count(*) AS n FROM users WHERE role = 'admin' AND status = 'active'`).get() as { n: number };
  return row.n;
}
