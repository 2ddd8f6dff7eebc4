/** SQL for API keys. Only digests and display prefixes are ever stored. */
import type { Database } from '#server/store/database.ts';
import { newPublicId } from '#server/store/public-id.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';
import type { UserRow } from '#server/store/users.ts';

export type ApiKeyRow = {
  id: number;
  public_id: string;
  user_id: number;
  name: string | null;
  digest: string;
  prefix: string;
  extra_scopes: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
  replaced_by: number | null;
  /** 'hub': a copy of a key the hub issued, replaced by each sync (migration 19). */
  origin: 'local' | 'hub';
};

export type ApiKeyWithOwner = ApiKeyRow & { user_public_id: string };

export async function insertApiKey(
  db: Database,
  input: { userId: number; name: string | null; digest: string; prefix: string; extraScopes: readonly string[]; at: string },
): Promise<ApiKeyRow> {
  return (await db.get(`INSERT INTO api_keys (public_id, user_id, name, digest, prefix, extra_scopes, created_at)
       VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING *`, [newPublicId('key'), input.userId, input.name, input.digest, input.prefix, JSON.stringify(input.extraScopes), input.at])) as ApiKeyRow;
}

export async function findApiKeyByDigest(db: Database, digest: string): Promise<{ key: ApiKeyRow; user: UserRow } | undefined> {
  const row = (await db.get(`SELECT k.*, u.public_id AS u_public_id, u.email AS u_email, u.name AS u_name, u.role AS u_role,
              u.status AS u_status, u.created_at AS u_created_at, u.updated_at AS u_updated_at, u.origin AS u_origin, u.disabled_at AS u_disabled_at
       FROM api_keys k JOIN users u ON u.id = k.user_id WHERE k.digest = ?`, [digest])) as (ApiKeyRow & Record<`u_${string}`, string | null>) | undefined;
  if (!row) return undefined;
  const user = {
    id: row.user_id,
    public_id: row.u_public_id,
    email: row.u_email,
    name: row.u_name,
    role: row.u_role,
    status: row.u_status,
    created_at: row.u_created_at,
    updated_at: row.u_updated_at,
    origin: row.u_origin,
    disabled_at: row.u_disabled_at,
  } as UserRow;
  return { key: row, user };
}

export async function findApiKeyByPublicId(db: Database, publicId: string): Promise<ApiKeyWithOwner | undefined> {
  return (await db.get(`SELECT k.*, u.public_id AS user_public_id FROM api_keys k JOIN users u ON u.id = k.user_id
       WHERE k.public_id = ?`, [publicId])) as ApiKeyWithOwner | undefined;
}

export async function findApiKeyById(db: Database, id: number): Promise<ApiKeyWithOwner | undefined> {
  return (await db.get(`SELECT k.*, u.public_id AS user_public_id FROM api_keys k JOIN users u ON u.id = k.user_id
       WHERE k.id = ?`, [id])) as ApiKeyWithOwner | undefined;
}

export async function listApiKeys(
  db: Database,
  filter: { userId?: number | undefined },
  page: PageRequest,
): Promise<Page<ApiKeyWithOwner>> {
  const rows = (await db.all(`SELECT k.*, u.public_id AS user_public_id FROM api_keys k JOIN users u ON u.id = k.user_id
       WHERE k.id > @after AND (CAST(@userId AS BIGINT) IS NULL OR k.user_id = @userId)
       ORDER BY k.id LIMIT @limit`, { after: page.afterId, userId: filter.userId ?? null, limit: page.limit + 1 })) as ApiKeyWithOwner[];
  return toPage(rows, page.limit);
}

export async function markApiKeyRotated(db: Database, id: number, expiresAt: string, replacedBy: number): Promise<void> {
  (await db.run('UPDATE api_keys SET expires_at = ?, replaced_by = ? WHERE id = ?', [expiresAt, replacedBy, id]));
}

export async function revokeApiKey(db: Database, id: number, at: string): Promise<void> {
  (await db.run('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?', [at, id]));
}

export async function touchApiKey(db: Database, id: number, at: string): Promise<void> {
  (await db.run('UPDATE api_keys SET last_used_at = ? WHERE id = ?', [at, id]));
}

/** Every key with its owner's public id, for the hub's directory (digests only, as stored). */
export async function listAllKeys(db: Database): Promise<ApiKeyWithOwner[]> {
  return (await db.all('SELECT k.*, u.public_id AS user_public_id FROM api_keys k JOIN users u ON u.id = k.user_id ORDER BY k.id')) as ApiKeyWithOwner[];
}

export type HubKey = { public_id: string; user_ref: number; name: string | null; digest: string; prefix: string; extra_scopes: string; created_at: string; expires_at: string | null; revoked_at: string | null };

/**
 * Inserts or replaces the local copy of a hub key, by public id. A local key with the same digest
 * cannot exist (keys are random), so a clash on the digest is a hub key re-issued under another id.
 */
export async function upsertHubKey(db: Database, k: HubKey): Promise<void> {
  await db.run(`INSERT INTO api_keys (public_id, user_id, name, digest, prefix, extra_scopes, created_at, expires_at, revoked_at, origin)
       VALUES (@public_id, @user_ref, @name, @digest, @prefix, @extra_scopes, @created_at, @expires_at, @revoked_at, 'hub')
       ON CONFLICT (public_id) DO UPDATE SET user_id = excluded.user_id, name = excluded.name, extra_scopes = excluded.extra_scopes,
         expires_at = excluded.expires_at, revoked_at = excluded.revoked_at, origin = 'hub'`, k);
}

/** Revokes the keys made on this workstation for a user who became the hub's (directory sync). */
export async function revokeLocalKeysOf(db: Database, userRef: number, at: string): Promise<number> {
  return await db.run("UPDATE api_keys SET revoked_at = ? WHERE user_id = ? AND origin = 'local' AND revoked_at IS NULL", [at, userRef]);
}
