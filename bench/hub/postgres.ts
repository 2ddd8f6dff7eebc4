/**
 * A throwaway PostgreSQL cluster for the hub bench, with default durability. It reuses the
 * tests' starter (test/helpers/postgres-cluster.ts: initdb, a free loopback port, everything
 * deleted on stop), which turns fsync, synchronous_commit and full_page_writes off because
 * test data is thrown away; here they go back on (ALTER SYSTEM, then a reload: all three take
 * effect without a restart) and are checked, so every commit is flushed to disk as SQLite's
 * durable commits are.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { startPostgresCluster, type PostgresCluster } from '../../test/helpers/postgres-cluster.ts';

export const DURABLE_SETTINGS = { fsync: 'on', synchronous_commit: 'on', full_page_writes: 'on' } as const;

export type BenchCluster = PostgresCluster & { version: string; settings: Record<string, string> };

export async function startDurableCluster(): Promise<BenchCluster> {
  const cluster = await startPostgresCluster();
  try {
    const client = new pg.Client({ connectionString: cluster.superuserUrl });
    await client.connect();
    try {
      for (const [name, value] of Object.entries(DURABLE_SETTINGS)) await client.query(`ALTER SYSTEM SET ${name} = '${value}'`);
      await client.query('SELECT pg_reload_conf()');
      const settings: Record<string, string> = {};
      // The reload reaches this backend asynchronously: ask until it shows.
      for (let attempt = 0; attempt < 50; attempt++) {
        for (const name of [...Object.keys(DURABLE_SETTINGS), 'shared_buffers', 'max_connections', 'wal_sync_method']) {
          settings[name] = ((await client.query<{ setting: string }>(`SELECT current_setting('${name}') AS setting`)).rows[0]?.setting ?? '?');
        }
        if (Object.entries(DURABLE_SETTINGS).every(([name, value]) => settings[name] === value)) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      for (const [name, value] of Object.entries(DURABLE_SETTINGS)) {
        if (settings[name] !== value) throw new Error(`PostgreSQL ${name} is ${settings[name]}, not ${value}`);
      }
      const version = (await client.query<{ server_version: string }>('SHOW server_version')).rows[0]?.server_version ?? '?';
      return { ...cluster, version, settings };
    } finally {
      await client.end();
    }
  } catch (error) {
    await cluster.stop();
    throw error;
  }
}

/** The postmaster's pid (the parent of every backend, the WAL writer, the checkpointer...). */
export async function postmasterPid(superuserUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: superuserUrl });
  await client.connect();
  try {
    const backend = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]?.pid;
    const stat = readFileSync(`/proc/${backend}/stat`, 'utf8');
    // Fields after the command: state, ppid, ...
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
  } finally {
    await client.end();
  }
}
