/**
 * A real, throwaway PostgreSQL cluster for tests: initdb into a temporary folder, a server on a free
 * loopback port, one fresh database per caller, everything deleted on stop(). No mocks.
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { appendFile, chown, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { inject } from 'vitest';

declare module 'vitest' {
  // Only an interface merges into vitest's declaration.
  // eslint-disable-next-line @typescript-eslint/consistent-type-definitions
  export interface ProvidedContext {
    /** Superuser URL of the run's cluster, set by test/helpers/postgres-global-setup.ts. */
    postgresUrl: string;
  }
}

export type PostgresCluster = {
  host: string;
  port: number;
  /** Connects as the cluster's superuser to its `postgres` maintenance database. */
  superuserUrl: string;
  /** Creates an empty database (a unique name unless given) and returns its postgres:// URL. */
  createDatabase(name?: string): Promise<string>;
  /** Kills the server (no checkpoint: the data is thrown away) and deletes its folder. */
  stop(): Promise<void>;
};

const run = promisify(execFile);
const HOST = '127.0.0.1';
const SUPERUSER = 'mia';
const INSTALL_HINT = 'install postgresql: apt-get install postgresql (or run scripts/system-deps.sh)';

// Durability is pointless for data deleted after the run.
const SERVER_SETTINGS = {
  fsync: 'off',
  synchronous_commit: 'off',
  full_page_writes: 'off',
  max_connections: '200',
  shared_buffers: '128MB',
};

export async function startPostgresCluster(): Promise<PostgresCluster> {
  const bin = await findBinDir();
  const asPostgres = await postgresRunner();
  const dir = await mkdtemp(join(tmpdir(), 'mia-pg-'));
  const dataDir = join(dir, 'data');
  const logFile = join(dir, 'server.log');
  let port = 0;
  try {
    if (asPostgres.owner) await chown(dir, asPostgres.owner.uid, asPostgres.owner.gid);
    await initdb(asPostgres, bin, dir, dataDir);
    port = await startServer(asPostgres, bin, dir, dataDir, logFile);
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }

  // If the process exits without stop() (a crash, process.exit), the postmaster would outlive it.
  const killOnExit = (): void => {
    try {
      const [file, args] = asPostgres.command(join(bin, 'pg_ctl'), ['-D', dataDir, '-m', 'immediate', 'stop']);
      execFileSync(file, args, { cwd: dir, stdio: 'ignore' });
    } catch {
      // Already gone.
    }
    // rm from fs/promises would never run inside an exit handler.
    execFileSync('rm', ['-rf', '--', dir], { stdio: 'ignore' });
  };
  process.once('exit', killOnExit);

  const superuserUrl = `postgres://${SUPERUSER}@${HOST}:${port}/postgres`;
  let stopped: Promise<void> | undefined;
  return {
    host: HOST,
    port,
    superuserUrl,
    createDatabase: (name) => createDatabase(superuserUrl, name),
    stop() {
      stopped ??= (async () => {
        process.removeListener('exit', killOnExit);
        try {
          await asPostgres.exec(join(bin, 'pg_ctl'), ['-D', dataDir, '-m', 'immediate', '-w', 'stop'], dir);
        } finally {
          await rm(dir, { recursive: true, force: true });
        }
      })();
      return stopped;
    },
  };
}

/** Creates an empty database on the run's cluster; needs postgres-global-setup.ts as a vitest globalSetup. */
export async function freshPostgresDatabase(): Promise<string> {
  const superuserUrl = inject('postgresUrl');
  if (!superuserUrl) {
    throw new Error("no PostgreSQL cluster: add 'test/helpers/postgres-global-setup.ts' to test.globalSetup in vitest.config.ts");
  }
  return createDatabase(superuserUrl);
}

export async function createDatabase(superuserUrl: string, name = `mia_test_${randomBytes(6).toString('hex')}`): Promise<string> {
  // Identifiers cannot be bound as parameters, so only plain names are accepted.
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a plain database name: ${name}`);
  const client = new pg.Client({ connectionString: superuserUrl });
  await client.connect();
  try {
    await client.query(`CREATE DATABASE "${name}"`);
  } finally {
    await client.end();
  }
  const url = new URL(superuserUrl);
  url.pathname = `/${name}`;
  return url.toString();
}

/** The newest installed server's bin folder (Debian keeps them out of PATH). */
async function findBinDir(): Promise<string> {
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? await readdir(root) : [];
  const newest = versions
    .filter((v) => /^\d+(\.\d+)?$/.test(v) && existsSync(join(root, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a))[0];
  if (newest === undefined) throw new Error(`PostgreSQL's initdb not found under ${root}/*/bin: ${INSTALL_HINT}`);
  return join(root, newest, 'bin');
}

type Runner = {
  /** Set when running as root: the folder must be handed over to this account. */
  owner: { uid: number; gid: number } | null;
  /** The file and arguments that run `command` as the account PostgreSQL runs as. */
  command(command: string, args: string[]): [string, string[]];
  exec(command: string, args: string[], cwd: string): Promise<void>;
};

/** PostgreSQL refuses to run as root (CI is root), so then it runs as Debian's postgres account. */
async function postgresRunner(): Promise<Runner> {
  const isRoot = process.getuid?.() === 0;
  let owner: Runner['owner'] = null;
  if (isRoot) {
    try {
      const uid = Number((await run('id', ['-u', 'postgres'])).stdout.trim());
      const gid = Number((await run('id', ['-g', 'postgres'])).stdout.trim());
      owner = { uid, gid };
    } catch {
      throw new Error(`running as root needs the 'postgres' account to run PostgreSQL: ${INSTALL_HINT}`);
    }
  }
  const command: Runner['command'] = (file, args) => (isRoot ? ['runuser', ['-u', 'postgres', '--', file, ...args]] : [file, args]);
  return {
    owner,
    command,
    async exec(file, commandArgs, cwd) {
      try {
        // cwd: the postgres account may not be allowed into the caller's working folder.
        await run(...command(file, commandArgs), { cwd });
      } catch (error) {
        const { stderr, stdout } = error as { stderr?: string; stdout?: string };
        throw new Error(`${file} ${commandArgs.join(' ')} failed:\n${(stderr || stdout || String(error)).trim()}`, { cause: error });
      }
    },
  };
}

async function initdb(runner: Runner, bin: string, dir: string, dataDir: string): Promise<void> {
  const common = ['-D', dataDir, '-A', 'trust', '-U', SUPERUSER, '--encoding=UTF8', '--no-sync'];
  try {
    await runner.exec(join(bin, 'initdb'), [...common, '--locale=C.UTF-8'], dir);
  } catch (error) {
    // Images without the C.UTF-8 locale (older glibc): byte-order collation is all the tests need.
    if (!String(error).includes('locale')) throw withFolderHint(error, dir);
    await rm(dataDir, { recursive: true, force: true });
    await runner.exec(join(bin, 'initdb'), [...common, '--no-locale'], dir).catch((e: unknown) => {
      throw withFolderHint(e, dir);
    });
  }
}

function withFolderHint(error: unknown, dir: string): unknown {
  if (!String(error).includes('ermission denied')) return error;
  return new Error(`${String(error)}\nthe postgres account must be able to reach ${dir} (set TMPDIR to a folder it can enter, e.g. /tmp)`, { cause: error });
}

/** Starts the server on a free port; retries when another process takes the port first. */
async function startServer(runner: Runner, bin: string, dir: string, dataDir: string, logFile: string): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const port = await freeLoopbackPort();
    // In postgresql.conf rather than `pg_ctl -o`, which goes through /bin/sh (the folder is a path).
    // The socket lives in our folder: /var/run/postgresql belongs to Debian's own (unused) service.
    // Appended again on a retry: the last line for a setting wins.
    const settings = { ...SERVER_SETTINGS, listen_addresses: HOST, port: String(port), unix_socket_directories: dir };
    const lines = Object.entries(settings).map(([key, value]) => `${key} = '${value.replaceAll("'", "''")}'\n`);
    await appendFile(join(dataDir, 'postgresql.conf'), `\n# mia test cluster\n${lines.join('')}`);
    try {
      // -l: without a log file the server would hold our stdout pipe open and execFile never returns.
      await runner.exec(join(bin, 'pg_ctl'), ['-D', dataDir, '-l', logFile, '-w', '-t', '60', 'start'], dir);
      return port;
    } catch (error) {
      const log = await readFile(logFile, 'utf8').catch(() => '');
      if (attempt < 3 && log.includes('could not bind')) continue;
      throw new Error(`${String(error)}\nserver log:\n${log.trim()}`, { cause: error });
    }
  }
}

function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, HOST, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}
