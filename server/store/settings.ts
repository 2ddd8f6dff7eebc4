/** Installation-wide values kept in the database (e.g. the pseudonymisation secret). */
import { sql, type Database } from '#server/store/database.ts';

export function getSetting(db: Database, key: string): string | undefined {
  const row = sql(db, 'SELECT value FROM settings WHERE key = ?').get(key) as { value: string } | undefined;
  return row?.value;
}

/** Inserts the value unless one exists, then returns the stored one: safe under races. */
export function ensureSetting(db: Database, key: string, value: string): string {
  sql(db, 'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING').run(key, value);
  const stored = getSetting(db, key);
  if (stored === undefined) throw new Error(`setting ${key} vanished after insert`);
  return stored;
}

export function setSetting(db: Database, key: string, value: string): void {
  sql(db, 'INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value').run(key, value);
}
