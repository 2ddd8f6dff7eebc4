/**
 * The SQLite connection. One file per data folder, shared safely by a running server and CLI
 * commands: WAL lets readers and one writer work at once, and busy_timeout makes a second
 * writer wait instead of failing with SQLITE_BUSY.
 */
import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';
import { applyMigrations } from '#server/store/migrations.ts';
import { registerSearchFold } from '#server/store/search-fold.ts';

export type Database = BetterSqlite3.Database;

export const DATABASE_FILE = 'mia.sqlite';

/**
 * MIA_SQLITE_BINDING: the path of a better_sqlite3.node built for another runtime's ABI. The
 * desktop app in development (`npm run desktop`) runs under Electron, which cannot load the
 * node_modules build made for Node; main/ builds a copy for Electron and names it here, so the
 * CLI and tests keep the Node build (better-sqlite3's `nativeBinding` option).
 */
export function openDatabase(dataDir: string, nativeBinding = process.env['MIA_SQLITE_BINDING']): Database {
  mkdirSync(dataDir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const file = join(dataDir, DATABASE_FILE);
  const created = !existsSync(file);
  const db = nativeBinding ? new BetterSqlite3(file, { nativeBinding }) : new BetterSqlite3(file);
  // Before the WAL and shared-memory files exist: SQLite gives them the database file's mode.
  if (created) chmodSync(file, PRIVATE_FILE_MODE);
  db.pragma('journal_mode = WAL');
  // NORMAL is durable across application crashes in WAL mode; only a power cut may lose the
  // last commits, never corrupt the file (sqlite.org/pragma.html#pragma_synchronous).
  db.pragma('synchronous = NORMAL');
  db.pragma('foreign_keys = ON');
  db.pragma('busy_timeout = 10000');
  applyMigrations(db);
  registerSearchFold(db);
  return db;
}

/** Runs `work` in one IMMEDIATE transaction so concurrent writers queue instead of deadlocking. */
export function inTransaction<T>(db: Database, work: () => T): T {
  return db.transaction(work).immediate();
}

/**
 * `inTransaction` for writes a user is told are kept (stored instances, verdicts, reports): the
 * commit syncs the WAL before returning, so a power cut after the acknowledgement loses nothing
 * (synchronous = NORMAL would lose the last commits; measured: 10 of 10 acknowledged uploads
 * gone after a shutdown that dropped unsynced writes). Everything else, the per-request audit
 * inserts above all, keeps NORMAL's one sync per checkpoint.
 */
export function inDurableTransaction<T>(db: Database, work: () => T): T {
  db.pragma('synchronous = FULL');
  try {
    return db.transaction(work).immediate();
  } finally {
    db.pragma('synchronous = NORMAL');
  }
}

const statements = new WeakMap<Database, Map<string, BetterSqlite3.Statement>>();

/** Prepared statements are cached per connection: preparing costs more than running most of
 * our queries, and the SQL strings are constants. */
export function sql(db: Database, text: string): BetterSqlite3.Statement {
  let cache = statements.get(db);
  if (!cache) {
    cache = new Map();
    statements.set(db, cache);
  }
  let statement = cache.get(text);
  if (!statement) {
    statement = db.prepare(text);
    cache.set(text, statement);
  }
  return statement;
}
