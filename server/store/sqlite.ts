/**
 * The workstation's database: the data folder's SQLite file through better-sqlite3. One file
 * per data folder, shared safely by a running server and CLI commands: WAL lets readers and one
 * writer work at once, and busy_timeout makes a second writer wait instead of failing.
 *
 * better-sqlite3 is synchronous, so a statement outside a transaction runs at once and hands back
 * a settled promise: the only cost over the synchronous store it replaced is the await. A
 * transaction, though, now spans awaits, and one connection cannot keep another caller's
 * statements out of it; so while one is open every other statement of the process waits at the
 * gate until it commits or rolls back (transactions do database work only: the wait is short).
 */
import { chmodSync, closeSync, existsSync, fsync, mkdirSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import BetterSqlite3 from 'better-sqlite3';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';
import { LOG_TABLES, statementText, type Database, type Params, type Statement, type TransactionOptions } from '#server/store/database.ts';
import { applySqliteMigrations } from '#server/store/migrations.ts';
import { registerSearchFold } from '#server/store/search-fold.ts';

export const DATABASE_FILE = 'mia.sqlite';

/** The SQLite database, with the connection itself for what only SQLite has (tests, tools). */
export type SqliteDatabase = Database & {
  readonly dialect: 'sqlite';
  /**
   * For pragmas and for tests. A write through it is not counted by readVersion, and kept answers
   * would outlive it (architecture test: server code only sets pragmas through it).
   */
  readonly connection: BetterSqlite3.Database;
  /**
   * Runs `work` while no statement of this process runs: the ones asked for meanwhile wait at the
   * gate, as behind a transaction. For work another connection does that this one's statements
   * would get in the way of (wal-checkpointer.ts).
   */
  holdStatements<T>(work: () => Promise<T>): Promise<T>;
};

export function isSqlite(db: Database): db is SqliteDatabase {
  return db.dialect === 'sqlite' && 'holdStatements' in db;
}

/** One holder at a time, first come first served. */
class Gate {
  private held = false;
  private readonly waiters: Array<() => void> = [];

  get busy(): boolean {
    return this.held;
  }

  /** Resolves when held; rejects after `timeoutMs` in the queue (the waiter leaves it). */
  acquire(timeoutMs?: number): Promise<void> {
    if (!this.held) {
      this.held = true;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const waiter = (): void => {
        clearTimeout(timer);
        resolve();
      };
      const timer = timeoutMs === undefined ? undefined : setTimeout(() => {
        const at = this.waiters.indexOf(waiter);
        if (at !== -1) this.waiters.splice(at, 1);
        reject(new Error(`a statement waited ${timeoutMs} ms for a transaction to end: does the transaction's work use the database instead of its tx?`));
      }, timeoutMs);
      this.waiters.push(waiter);
    });
  }

  release(): void {
    const next = this.waiters.shift();
    if (next) next();
    else this.held = false;
  }
}

type Connection = {
  db: BetterSqlite3.Database;
  gate: Gate;
  statements: Map<string, BetterSqlite3.Statement>;
  /** The same texts prepared to return rows as arrays. */
  rawStatements: Map<string, BetterSqlite3.Statement>;
  savepoints: number;
  /** The write-ahead log, opened at the first durable commit (see `syncWal`). */
  walFd?: number;
  /** Prepared statements that write rows a read can return (changesContent). */
  contentWriters: WeakSet<BetterSqlite3.Statement>;
  /**
   * Counts this connection's content writes as they run. A transaction's count moves before its
   * commit, but the reads of this process wait at the gate until it ends, so a version read
   * meanwhile is followed only by reads of the committed (or rolled back) state.
   */
  contentWrites: number;
  /** PRAGMA data_version: changes when another connection (process, worker) commits. */
  dataVersion?: BetterSqlite3.Statement;
};

/** The table an INSERT, REPLACE, UPDATE or DELETE names first; a statement it cannot read (a
 * WITH before the write) counts as writing content. */
const WRITE_TARGET = /^\s*(?:INSERT(?:\s+OR\s+\w+)?\s+INTO|REPLACE\s+INTO|UPDATE(?:\s+OR\s+\w+)?|DELETE\s+FROM)\s+["`[]?(\w+)/i;

/** Whether running the statement may change what a read returns (readVersion). */
function changesContent(prepared: BetterSqlite3.Statement, text: string): boolean {
  if (prepared.readonly) return false;
  const table = WRITE_TARGET.exec(text)?.[1]?.toLowerCase();
  return table === undefined || !LOG_TABLES.has(table);
}

function readVersion(conn: Connection): string {
  conn.dataVersion ??= conn.db.prepare('PRAGMA data_version').pluck();
  return `${String(conn.dataVersion.get())}:${conn.contentWrites}`;
}

const fsyncAsync = promisify(fsync);

/**
 * A durable commit's fsync, on libuv's thread pool instead of in the event loop. The commit ran
 * with synchronous = NORMAL, so its frames are in the WAL file but not yet on disk; fsync of that
 * file makes them so, which is exactly what synchronous = FULL adds in WAL mode (one sync of the
 * WAL per commit, sqlite.org/pragma.html#pragma_synchronous and wal.html). Frames are appended
 * after their WAL header, so a cut before this fsync ends loses the commit whole, never corrupts
 * (each frame's checksum chains from the header): the caller has not been answered yet.
 *
 * Measured (docs/dicom-network.md): with FULL, better-sqlite3 sat in fsync inside the event loop,
 * ~3 ms a commit, during which no socket or finished file fsync could be handled; C-STOREs on
 * parallel associations then queued one commit each instead of sharing one.
 *
 * The fd stays open for the connection's life: SQLite keeps the WAL file (same inode) while a
 * connection is open in WAL mode, and SQLite does not lock the WAL file itself (its locks are in
 * the -shm file), so this descriptor cannot release one of SQLite's POSIX locks when closed.
 */
async function syncWal(conn: Connection): Promise<void> {
  conn.walFd ??= openSync(`${conn.db.name}-wal`, 'r');
  await fsyncAsync(conn.walFd);
}

/** Prepared statements are cached per connection: preparing costs more than running most of our
 * queries, and the texts are constants. Statements returning rows as arrays (`values`) are kept
 * apart: a statement's mode is set once. */
function prepare(conn: Connection, statement: Statement, rows: 'objects' | 'arrays' = 'objects'): BetterSqlite3.Statement {
  const text = statementText(statement, 'sqlite');
  const cache = rows === 'arrays' ? conn.rawStatements : conn.statements;
  let prepared = cache.get(text);
  if (!prepared) {
    prepared = conn.db.prepare(text);
    if (rows === 'arrays') prepared.raw(true);
    if (changesContent(prepared, text)) conn.contentWriters.add(prepared);
    cache.set(text, prepared);
  }
  return prepared;
}

/**
 * Counts a content write that changed rows (readVersion), in the same synchronous call that ran
 * it, so no read of this process comes between the two. A write that matched nothing is not
 * counted: an idle worker's claim of queued analyses every two seconds (0 rows) ended every kept
 * answer each time, and 50 connections then computed the same 500-result page 50 times over
 * (bench/api.bench.ts, limit=500: answers of 0.6-0.8 s).
 */
function counted(conn: Connection, prepared: BetterSqlite3.Statement, changed: boolean): void {
  if (changed && conn.contentWriters.has(prepared)) conn.contentWrites++;
}

function bind(params: Params | undefined): unknown[] {
  if (params === undefined) return [];
  if (!Array.isArray(params)) return [params];
  // better-sqlite3 would take [{...}] as named values; PostgreSQL's path does not, so neither may this.
  if (params.some((value) => typeof value === 'object' && value !== null && !Buffer.isBuffer(value))) {
    throw new Error('positional values must be plain values; pass named values as an object');
  }
  return params;
}

type Executor = {
  all(statement: Statement, params?: Params): unknown[];
  values(statement: Statement, params?: Params): unknown[][];
  get(statement: Statement, params?: Params): unknown;
  run(statement: Statement, params?: Params): number;
};

function executor(conn: Connection): Executor {
  return {
    // A write that returns rows (RETURNING) returns one for each row it changed.
    all: (statement, params) => {
      const prepared = prepare(conn, statement);
      const rows = prepared.all(...bind(params));
      counted(conn, prepared, rows.length > 0);
      return rows;
    },
    values: (statement, params) => {
      const prepared = prepare(conn, statement, 'arrays');
      const rows = prepared.all(...bind(params)) as unknown[][];
      counted(conn, prepared, rows.length > 0);
      return rows;
    },
    get: (statement, params) => {
      const prepared = prepare(conn, statement);
      const row: unknown = prepared.get(...bind(params));
      counted(conn, prepared, row !== undefined);
      return row;
    },
    run: (statement, params) => {
      const prepared = prepare(conn, statement);
      const { changes } = prepared.run(...bind(params));
      counted(conn, prepared, changes > 0);
      return changes;
    },
  };
}

/**
 * No transaction of ours lasts this long (they do database work only); a statement that waits
 * this long is waiting for its own transaction, which would otherwise hang for ever.
 */
const GATE_TIMEOUT_MS = 30_000;

/** Runs `work` now, or after the open transaction when there is one; errors become rejections. */
function outside<T>(conn: Connection, work: () => T): Promise<T> {
  if (!conn.gate.busy) {
    try {
      return Promise.resolve(work());
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }
  return conn.gate.acquire(GATE_TIMEOUT_MS).then(
    () => {
      try {
        return work();
      } finally {
        conn.gate.release();
      }
    },
  );
}

function inside<T>(isOpen: () => boolean, work: () => T): Promise<T> {
  if (!isOpen()) return Promise.reject(new Error('a transaction handle was used after its transaction ended'));
  try {
    return Promise.resolve(work());
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

/** The handle a transaction's work gets: it bypasses the gate its transaction holds. */
function transactionHandle(conn: Connection, isOpen: () => boolean): Database {
  const run = executor(conn);
  const handle: Database = {
    dialect: 'sqlite',
    all: <T>(statement: Statement, params?: Params) => inside(isOpen, () => run.all(statement, params) as T[]),
    values: (statement, params) => inside(isOpen, () => run.values(statement, params)),
    get: <T>(statement: Statement, params?: Params) => inside(isOpen, () => run.get(statement, params) as T | undefined),
    run: (statement, params) => inside(isOpen, () => run.run(statement, params)),
    async transaction<T>(work: (tx: Database) => Promise<T>): Promise<T> {
      if (!isOpen()) throw new Error('a transaction handle was used after its transaction ended');
      const name = `mia_sp${++conn.savepoints}`;
      conn.db.exec(`SAVEPOINT ${name}`);
      let open = true;
      try {
        const result = await work(transactionHandle(conn, () => open && isOpen()));
        conn.db.exec(`RELEASE ${name}`);
        return result;
      } catch (err) {
        conn.db.exec(`ROLLBACK TO ${name}`);
        conn.db.exec(`RELEASE ${name}`);
        throw err;
      } finally {
        open = false;
      }
    },
    // Reads inside see the transaction's own writes before they are committed: nothing to keep.
    readVersion: () => null,
    close: () => Promise.reject(new Error('close the database, not a transaction')),
  };
  return handle;
}

async function transaction<T>(conn: Connection, work: (tx: Database) => Promise<T>, options: TransactionOptions = {}): Promise<T> {
  await conn.gate.acquire();
  let open = false;
  try {
    // IMMEDIATE: concurrent writers (a CLI command beside the server) queue on busy_timeout
    // instead of deadlocking on a lock upgrade.
    conn.db.exec('BEGIN IMMEDIATE');
    open = true;
    const result = await work(transactionHandle(conn, () => open));
    conn.db.exec('COMMIT');
    open = false;
    // Still holding the gate: no statement of this process sees the commit before it is durable.
    if (options.durable) await syncWal(conn);
    return result;
  } catch (err) {
    // A failed COMMIT (full disk) may already have rolled back: SQLite then has no transaction.
    if (conn.db.inTransaction) conn.db.exec('ROLLBACK');
    throw err;
  } finally {
    open = false;
    conn.gate.release();
  }
}

export type OpenOptions = {
  /**
   * Default MIA_SQLITE_BINDING: the path of a better_sqlite3.node built for another runtime's
   * ABI. The desktop app in development (`npm run desktop`) runs under Electron, which cannot load
   * the node_modules build made for Node; main/ builds a copy for Electron and names it there, so
   * the CLI and tests keep the Node build (better-sqlite3's `nativeBinding` option).
   */
  nativeBinding?: string | undefined;
  /**
   * The connection's page cache in KiB. better-sqlite3 builds SQLite with 16 MB a connection
   * (DEFAULT_CACHE_SIZE=-16000), right for the server's one connection, which reads the same
   * indexes request after request; a connection that reads its rows once needs little.
   */
  cacheKib?: number | undefined;
};

export function openDatabase(dataDir: string, options: OpenOptions = {}): SqliteDatabase {
  const nativeBinding = options.nativeBinding ?? process.env['MIA_SQLITE_BINDING'];
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
  if (options.cacheKib !== undefined) db.pragma(`cache_size = -${Math.max(1, Math.trunc(options.cacheKib))}`);
  try {
    // Before the migrations: migration 35 folds the rows already stored with it.
    registerSearchFold(db);
    applySqliteMigrations(db);
  } catch (err) {
    db.close();
    throw err;
  }

  const conn: Connection = {
    db,
    gate: new Gate(),
    statements: new Map(),
    rawStatements: new Map(),
    savepoints: 0,
    contentWriters: new WeakSet(),
    contentWrites: 0,
  };
  const run = executor(conn);
  let closing: Promise<void> | undefined;
  return {
    dialect: 'sqlite',
    connection: db,
    all: <T>(statement: Statement, params?: Params) => outside(conn, () => run.all(statement, params) as T[]),
    values: (statement, params) => outside(conn, () => run.values(statement, params)),
    get: <T>(statement: Statement, params?: Params) => outside(conn, () => run.get(statement, params) as T | undefined),
    run: (statement, params) => outside(conn, () => run.run(statement, params)),
    transaction: (work, options) => transaction(conn, work, options),
    readVersion: () => readVersion(conn),
    async holdStatements(work) {
      await conn.gate.acquire();
      try {
        return await work();
      } finally {
        conn.gate.release();
      }
    },
    close() {
      // After the statements already queued; later ones fail as on any closed connection.
      closing ??= conn.gate.acquire().then(() => {
        if (conn.walFd !== undefined) closeSync(conn.walFd);
        db.close();
        conn.gate.release();
      });
      return closing;
    },
  };
}
