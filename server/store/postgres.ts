/**
 * The hub's database: PostgreSQL through node-postgres (pg), shared by every API node of a
 * hospital install. Statements are the store's own texts with their placeholders rewritten once
 * (`?` and `@name` to `$n`) and sent as named prepared statements, which measured at par with
 * SQLite on large reads (docs/hub-store.md).
 *
 * Transactions are SERIALIZABLE and run again when PostgreSQL reports a conflict with a
 * concurrent one (40001, 40P01): the same guarantee the workstation's one-writer SQLite gives,
 * so domain code that reads, decides and writes inside a transaction stays correct with many
 * nodes writing at once.
 */
import { randomInt } from 'node:crypto';
import pg from 'pg';
import { statementText, type Database, type Params, type Statement, type TransactionOptions } from '#server/store/database.ts';
import { applyPostgresMigrations } from '#server/store/migrations.ts';

/** The PostgreSQL database, with its pool for LISTEN/NOTIFY and the tools that need a client. */
export type PostgresDatabase = Database & { readonly dialect: 'postgres'; readonly pool: pg.Pool };

type Prepared = { name: string; text: string; names: readonly string[] | null };

/** Rewritten statements, shared by every pool: a statement's text is a constant of the code. */
const prepared = new Map<string, Prepared>();

/**
 * `?` -> $1, $2...; `@name` -> $n (the same n for each use of a name). Quoted strings, quoted
 * identifiers and comments are left alone, and so are `::` casts.
 */
export function toPostgresPlaceholders(text: string): { text: string; names: readonly string[] | null } {
  let out = '';
  let positional = 0;
  const names: string[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i] as string;
    if (c === "'" || c === '"') {
      const end = text.indexOf(c, i + 1);
      const stop = end === -1 ? text.length : end + 1;
      out += text.slice(i, stop);
      i = stop - 1;
    } else if (c === '-' && text[i + 1] === '-') {
      const end = text.indexOf('\n', i);
      const stop = end === -1 ? text.length : end;
      out += text.slice(i, stop);
      i = stop - 1;
    } else if (c === '?') {
      out += `$${++positional}`;
    } else if (c === '@' && /[A-Za-z_]/.test(text[i + 1] ?? '')) {
      const match = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i + 1));
      const name = match?.[0] ?? '';
      let index = names.indexOf(name);
      if (index === -1) index = names.push(name) - 1;
      out += `$${index + 1}`;
      i += name.length;
    } else {
      out += c;
    }
  }
  if (positional > 0 && names.length > 0) throw new Error('a statement mixes ? and @name placeholders');
  return { text: out, names: names.length > 0 ? names : null };
}

function prepare(statement: Statement): Prepared {
  const source = statementText(statement, 'postgres');
  let found = prepared.get(source);
  if (!found) {
    const rewritten = toPostgresPlaceholders(source);
    found = { name: `mia_${prepared.size + 1}`, ...rewritten };
    prepared.set(source, found);
  }
  return found;
}

function values(statement: Prepared, params: Params | undefined): unknown[] {
  if (params === undefined) return [];
  if (Array.isArray(params) && statement.names) throw new Error('positional values for a statement with @name placeholders');
  if (Array.isArray(params)) return params.map((v: unknown) => (v === undefined ? null : v));
  const named = params as Readonly<Record<string, unknown>>;
  if (!statement.names) throw new Error('named values for a statement without @name placeholders');
  return statement.names.map((name) => {
    if (!(name in named)) throw new Error(`no value for @${name}`);
    return named[name] ?? null;
  });
}

type Queryable = { query(config: pg.QueryConfig): Promise<pg.QueryResult> };

async function query(on: Queryable, statement: Statement, params: Params | undefined, rowMode?: 'array'): Promise<pg.QueryResult> {
  const p = prepare(statement);
  return on.query({ name: p.name, text: p.text, values: values(p, params), ...(rowMode ? { rowMode } : {}) });
}

/** Serialization failure and deadlock: the transaction lost a race and may simply run again. */
const RETRYABLE = new Set(['40001', '40P01']);
const MAX_ATTEMPTS = 20;

function retryable(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' && RETRYABLE.has(err.code);
}

function clientHandle(client: pg.PoolClient, isOpen: () => boolean, savepoints: { n: number }): Database {
  const check = (): void => {
    if (!isOpen()) throw new Error('a transaction handle was used after its transaction ended');
  };
  return {
    dialect: 'postgres',
    async all<T>(statement: Statement, params?: Params) {
      check();
      return (await query(client, statement, params)).rows as T[];
    },
    async values(statement, params) {
      check();
      return (await query(client, statement, params, 'array')).rows as unknown[][];
    },
    async get<T>(statement: Statement, params?: Params) {
      check();
      return (await query(client, statement, params)).rows[0] as T | undefined;
    },
    async run(statement, params) {
      check();
      return (await query(client, statement, params)).rowCount ?? 0;
    },
    async transaction<T>(work: (tx: Database) => Promise<T>): Promise<T> {
      check();
      const name = `mia_sp${++savepoints.n}`;
      await client.query(`SAVEPOINT ${name}`);
      let open = true;
      try {
        const result = await work(clientHandle(client, () => open && isOpen(), savepoints));
        await client.query(`RELEASE SAVEPOINT ${name}`);
        return result;
      } catch (err) {
        await client.query(`ROLLBACK TO SAVEPOINT ${name}`);
        throw err;
      } finally {
        open = false;
      }
    },
    readVersion: () => null,
    close: () => Promise.reject(new Error('close the database, not a transaction')),
  };
}

/** int8 (counts, ids) and numeric as numbers: mia's ids and sizes stay far below 2^53. */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === pg.types.builtins.INT8 || oid === pg.types.builtins.NUMERIC) return (value: string) => Number(value);
    return format === 'binary' ? pg.types.getTypeParser(oid, 'binary') : pg.types.getTypeParser(oid, 'text');
  },
} as pg.CustomTypesConfig;

export type PostgresOptions = {
  /** Connections this node holds at most (default 20). */
  poolSize?: number;
};

export async function openPostgres(url: string, options: PostgresOptions = {}): Promise<PostgresDatabase> {
  const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 20, types, application_name: 'mia' });
  // An idle client that loses its connection (the server restarted) must not crash the process.
  pool.on('error', () => undefined);
  try {
    await applyPostgresMigrations(pool);
  } catch (err) {
    await pool.end();
    throw err;
  }

  const transaction = async <T>(work: (tx: Database) => Promise<T>, options: TransactionOptions = {}): Promise<T> => {
    const begin = options.isolation === 'read committed' ? 'BEGIN ISOLATION LEVEL READ COMMITTED' : 'BEGIN ISOLATION LEVEL SERIALIZABLE';
    for (let attempt = 1; ; attempt++) {
      const client = await pool.connect();
      let open = false;
      try {
        await client.query(begin);
        open = true;
        const result = await work(clientHandle(client, () => open, { n: 0 }));
        await client.query('COMMIT');
        open = false;
        return result;
      } catch (err) {
        open = false;
        await client.query('ROLLBACK').catch(() => undefined);
        if (!retryable(err) || attempt >= MAX_ATTEMPTS) throw err;
      } finally {
        open = false;
        client.release();
      }
      // Back off, growing and at random, so the transactions that collided do not collide again.
      await new Promise((resolve) => setTimeout(resolve, randomInt(1, Math.min(200, 2 ** attempt) + 2)));
    }
  };

  let closing: Promise<void> | undefined;
  return {
    dialect: 'postgres',
    pool,
    async all<T>(statement: Statement, params?: Params) {
      return (await query(pool, statement, params)).rows as T[];
    },
    async values(statement, params) {
      return (await query(pool, statement, params, 'array')).rows as unknown[][];
    },
    async get<T>(statement: Statement, params?: Params) {
      return (await query(pool, statement, params)).rows[0] as T | undefined;
    },
    async run(statement, params) {
      return (await query(pool, statement, params)).rowCount ?? 0;
    },
    transaction,
    readVersion: () => null,
    close() {
      closing ??= pool.end();
      return closing;
    },
  };
}
