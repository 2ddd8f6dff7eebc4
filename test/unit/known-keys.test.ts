/**
 * Keys looked up by digest are kept between requests while the store is unchanged
 * (server/auth/known-keys.ts): a key revoked, a user disabled, by this process or another
 * connection to the same file, is refused at the very next request.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { authenticate } from '#server/auth/authenticate.ts';
import { issueKeyForUser } from '#server/auth/api-keys.ts';
import { revokeApiKey } from '#server/store/api-keys.ts';
import { openDatabase, type SqliteDatabase } from '#server/store/sqlite.ts';
import { updateUser } from '#server/store/users.ts';
import { findOrCreateUser } from '#server/users/users.ts';
import { manualClock } from '../helpers/clock.ts';

let dir: string;
let db: SqliteDatabase;
const clock = manualClock();
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mia-known-keys-'));
  db = openDatabase(dir);
});
afterEach(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

async function issued(email: string): Promise<{ header: string; keyRef: number; userRef: number }> {
  const { user } = await findOrCreateUser({ db, clock }, { email, role: 'radiologist' });
  const key = await issueKeyForUser({ db, clock }, { userRef: user.id, name: null, extraScopes: [] });
  return { header: `Bearer ${key.key}`, keyRef: key.row.id, userRef: user.id };
}

describe('keys known between requests', () => {
  it('refuses a key revoked through another connection at the next request', async () => {
    const { header, keyRef } = await issued('kept-revoked@hospital.test');
    expect((await authenticate(db, clock, header)).ok).toBe(true);
    expect((await authenticate(db, clock, header)).ok).toBe(true);
    const other = openDatabase(dir);
    try {
      await revokeApiKey(other, keyRef, clock.now().toISOString());
    } finally {
      await other.close();
    }
    expect(await authenticate(db, clock, header)).toMatchObject({ ok: false, reason: 'API key was revoked' });
  });

  it("refuses a disabled user's key at the next request, and takes it again once enabled", async () => {
    const { header, userRef } = await issued('kept-disabled@hospital.test');
    expect((await authenticate(db, clock, header)).ok).toBe(true);
    await updateUser(db, userRef, { status: 'disabled', at: clock.now().toISOString() });
    expect(await authenticate(db, clock, header)).toMatchObject({ ok: false, reason: 'the user of this API key is disabled' });
    await updateUser(db, userRef, { status: 'active', at: clock.now().toISOString() });
    expect((await authenticate(db, clock, header)).ok).toBe(true);
  });
});
