/** Installation-wide values kept in the database (e.g. the pseudonymisation secret). */
import type { Database } from '#server/store/database.ts';

export async function getSetting(db: Database, key: string): Promise<string | undefined> {
  const row = (await db.get('SELECT value FROM settings WHERE key = ?', [key])) as { value: string } | undefined;
  return row?.value;
}

/** Inserts the value unless one exists, then returns the stored one: safe under races. */
export async function ensureSetting(db: Database, key: string, value: string): Promise<string> {
  (await db.run('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING', [key, value]));
  const stored = await getSetting(db, key);
  if (stored === undefined) throw new Error(`setting ${key} vanished after insert`);
  return stored;
}

export async function setSetting(db: Database, key: string, value: string): Promise<void> {
  (await db.run('INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value', [key, value]));
}
