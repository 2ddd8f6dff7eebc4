/**
 * The store's one door (issue 12): an asynchronous database that the same domain code uses on
 * both backends. The workstation opens its data folder's SQLite file (server/store/sqlite.ts,
 * better-sqlite3, embedded); a hub opens PostgreSQL (server/store/postgres.ts). Store modules
 * write each statement once, with `?` or `@name` placeholders; the few that differ between the
 * dialects give both texts side by side (`{ sqlite, postgres }`). Evidence for this shape rather
 * than a query builder: docs/hub-store.md.
 */
export type Dialect = 'sqlite' | 'postgres';

/** A statement's text, or its two texts where the dialects disagree. */
export type Statement = string | { readonly sqlite: string; readonly postgres: string };

/** Positional values for `?`, or named ones for `@name`. */
export type Params = readonly unknown[] | Readonly<Record<string, unknown>>;

export type TransactionOptions = {
  /**
   * For writes a user is told are kept (stored instances, verdicts, reports): the commit reaches
   * the disk before it returns, so a power cut after the acknowledgement loses nothing. SQLite
   * otherwise commits with synchronous = NORMAL (measured: 10 of 10 acknowledged uploads gone
   * after a shutdown that dropped unsynced writes); PostgreSQL commits durably in any case.
   */
  durable?: boolean;
  /**
   * 'read committed' (PostgreSQL only) for work whose every statement is safe on its own - upserts
   * that do nothing on a conflict, counters added to, rows compared and set - and that many
   * writers run at once on the same rows: an import's batches all add to their series' instance
   * count. Such writers then wait on each other's row locks instead of failing serialization and
   * running again, which under load can fail every time. Serializable is the default.
   */
  isolation?: 'serializable' | 'read committed';
};

export type Database = {
  readonly dialect: Dialect;
  /** Every row the statement returns. */
  all<T>(statement: Statement, params?: Params): Promise<T[]>;
  /**
   * Every row as an array of its column values, in the statement's column order: for pages read
   * in bulk. better-sqlite3 builds a row object a property at a time, which was 40% of a 500-row
   * results statement (1.52 -> 0.90 ms with the caller building the same objects itself).
   */
  values(statement: Statement, params?: Params): Promise<unknown[][]>;
  /** The first row, or undefined. */
  get<T>(statement: Statement, params?: Params): Promise<T | undefined>;
  /** Runs a statement and resolves with the number of rows it changed. */
  run(statement: Statement, params?: Params): Promise<number>;
  /**
   * Runs `work` in one transaction that is serializable: on SQLite an IMMEDIATE transaction that
   * queues every other statement of the process behind it; on PostgreSQL SERIALIZABLE, run again
   * from the start when the server reports a conflict with a concurrent one. So `work` must do
   * nothing but database calls through `tx` (no files, no network) and may run more than once.
   * Inside, `tx.transaction` nests as a savepoint.
   */
  transaction<T>(work: (tx: Database) => Promise<T>, options?: TransactionOptions): Promise<T>;
  /**
   * A token that stays the same only while no committed write can have changed what a read of
   * this database returns, or null where the backend cannot tell (PostgreSQL: other processes and
   * hub nodes commit without this one hearing of it). Writes to the request log tables
   * (LOG_TABLES: every request adds to them) leave it alone, so what reads those must not be kept
   * by it. For answers kept between requests (server/http/shared-answers.ts).
   */
  readVersion(): string | null;
  /** Closes the connection(s) after the statements already started. */
  close(): Promise<void>;
};

/** Written on every request (its audit event, its rate-limit count); readVersion ignores them. */
export const LOG_TABLES: ReadonlySet<string> = new Set(['audit_events', 'rate_limits']);

export function statementText(statement: Statement, dialect: Dialect): string {
  return typeof statement === 'string' ? statement : statement[dialect];
}

/** Runs `work` in one transaction (see Database.transaction). */
export async function inTransaction<T>(db: Database, work: (tx: Database) => Promise<T>): Promise<T> {
  return await db.transaction(work);
}

/** `inTransaction` whose commit is on disk before it resolves (see TransactionOptions.durable). */
export async function inDurableTransaction<T>(db: Database, work: (tx: Database) => Promise<T>): Promise<T> {
  return await db.transaction(work, { durable: true });
}

/** One statement whose texts differ in a fragment: `build` runs once per dialect. */
export function perDialect(build: (dialect: Dialect) => string): Statement {
  return { sqlite: build('sqlite'), postgres: build('postgres') };
}

/**
 * The elements of a JSON array, as a table with one text column `value`: how a list of ids or
 * words travels as one parameter on both backends.
 */
export function jsonElements(dialect: Dialect, json: string): string {
  return dialect === 'sqlite' ? `json_each(${json})` : `json_array_elements_text((${json})::json) AS json_elements(value)`;
}

/**
 * `= ANY` of the integer ids of a JSON array parameter, the array built once by an InitPlan. The
 * planner then walks the table's index, one probe per id. (`IN (SELECT ... FROM
 * json_array_elements_text(...))` was the first form: the planner guesses 100 elements and
 * hashes them against a sequential scan of the whole table, 0.58 ms to find 50 of 1,000 analyses
 * against 0.09-0.24 ms here, and linear in the table's size.)
 */
export function inJsonIds(dialect: Dialect, json = '?'): string {
  return dialect === 'sqlite' ? `IN (SELECT value FROM json_each(${json}))` : `= ANY(ARRAY(SELECT value::bigint FROM ${jsonElements(dialect, json)}))`;
}
