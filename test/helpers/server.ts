/**
 * Starts the real server on a temporary data folder and speaks HTTP to it. Its database is the
 * folder's real SQLite file, or, in the `postgres` test project (MIA_TEST_BACKEND=postgres), a
 * fresh database on the run's throwaway PostgreSQL cluster: the same tests hold on both backends.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Role, GrantableScope } from '#common/vocabulary.ts';
import { issueKeyForUser } from '#server/auth/api-keys.ts';
import type BetterSqlite3 from 'better-sqlite3';
import type { ServerConfigInput } from '#server/config.ts';
import type { Database } from '#server/store/database.ts';
import type { SqliteDatabase } from '#server/store/sqlite.ts';
import { createServer, type MiaServer } from '#server/create-server.ts';
import { findOrCreateUser } from '#server/users/users.ts';
import { manualClock, type ManualClock } from './clock.ts';
import { freshPostgresDatabase } from './postgres-cluster.ts';

export type Reply = {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON body, or undefined when the body is not JSON. */
  json: any;
};

export type RequestOptions = {
  key?: string | null;
  body?: unknown;
  rawBody?: string | Buffer;
  headers?: Record<string, string>;
};

export type TestServer = {
  url: string;
  server: MiaServer;
  dataDir: string;
  clock: ManualClock;
  adminKey: string;
  /** Creates (or reuses) a user with this role and issues a new key. */
  keyFor(role: Role, options?: { email?: string; scopes?: GrantableScope[] }): Promise<{ key: string; keyId: string; userId: string }>;
  request(method: string, path: string, options?: RequestOptions): Promise<Reply>;
  close(): Promise<void>;
};

export async function startTestServer(config: Partial<ServerConfigInput> = {}): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mia-test-'));
  const clock = manualClock();
  const databaseUrl = config.databaseUrl ?? (onPostgres() ? await freshPostgresDatabase() : null);
  const server = await createServer({ clock, ...config, dataDir, databaseUrl });
  const url = await server.listen(0, '127.0.0.1');
  const deps = { db: server.services.db, clock };

  const keyFor: TestServer['keyFor'] = async (role, options = {}) => {
    const email = options.email ?? `${role}@hospital.test`;
    const { user } = await findOrCreateUser(deps, { email, role });
    const issued = await issueKeyForUser(deps, { userRef: user.id, name: null, extraScopes: options.scopes ?? [] });
    return { key: issued.key, keyId: issued.row.public_id, userId: user.public_id };
  };

  const request: TestServer['request'] = async (method, path, options = {}) => {
    const headers: Record<string, string> = { ...options.headers };
    const key = options.key === undefined ? adminKey : options.key;
    if (key !== null) headers['Authorization'] = `Bearer ${key}`;
    let body: string | Buffer | undefined;
    if (options.rawBody !== undefined) body = options.rawBody;
    else if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers['Content-Type'] ??= 'application/json';
    }
    // node:http rather than fetch: fetch refuses to send a custom Host header.
    const send = (retried: boolean): Promise<{ status: number; responseHeaders: Headers; text: string }> =>
      new Promise((resolve, reject) => {
        const req = httpRequest(url + path, { method, headers }, (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => {
            const responseHeaders = new Headers();
            for (const [name, value] of Object.entries(res.headers)) {
              if (value !== undefined) responseHeaders.set(name, Array.isArray(value) ? value.join(', ') : value);
            }
            resolve({ status: res.statusCode ?? 0, responseHeaders, text: Buffer.concat(chunks).toString('utf8') });
          });
          res.on('error', reject);
        });
        req.on('error', (err: NodeJS.ErrnoException) => {
          // A kept-alive connection the server closed for idling (its 5 s keep-alive timeout) as this
          // request went out on it: the server never read the request, so it is sent again once, on
          // a new connection (Node's documented remedy: request.reusedSocket).
          if (!retried && req.reusedSocket && err.code === 'ECONNRESET') send(true).then(resolve, reject);
          else reject(err);
        });
        if (body !== undefined) req.write(body);
        req.end();
      });
    const { status, responseHeaders, text } = await send(false);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { status, headers: responseHeaders, text, json };
  };

  const adminKey = (await keyFor('admin')).key;
  return {
    url,
    server,
    dataDir,
    clock,
    adminKey,
    keyFor,
    request,
    async close() {
      await server.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The SQLite connection under a test server's database, for tests of what only SQLite has
 * (pragmas, triggers that simulate a failing disk, VACUUM INTO). */
export function sqliteConnection(db: Database): BetterSqlite3.Database {
  if (!('connection' in db) || db.dialect !== 'sqlite') throw new Error('this test needs the SQLite backend');
  return (db as SqliteDatabase).connection;
}

/** True in the `postgres` test project: servers get a PostgreSQL database, not a SQLite file. */
export function onPostgres(): boolean {
  return process.env['MIA_TEST_BACKEND'] === 'postgres';
}
