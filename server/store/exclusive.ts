/**
 * Work that one process at a time may do on a database, whoever else is running: on a hub, the
 * audit retention of one node must not delete the archive file another node has just written
 * and not yet recorded. PostgreSQL holds a session advisory lock for the work's whole run; a node
 * that finds it taken skips the run (the holder is doing it). A workstation's SQLite has one
 * server, and the CLI runs no background work, so there the work simply runs.
 */
import type { Database } from '#server/store/database.ts';
import type { PostgresDatabase } from '#server/store/postgres.ts';

/** Resolves with the work's result, or undefined when another process holds the task. */
export async function runExclusive<T>(db: Database, task: string, work: () => Promise<T>): Promise<T | undefined> {
  if (db.dialect !== 'postgres') return await work();
  const client = await (db as PostgresDatabase).pool.connect();
  try {
    const taken = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtext($1)) AS ok', [`mia:${task}`]);
    if (!taken.rows[0]?.ok) return undefined;
    try {
      return await work();
    } finally {
      await client.query('SELECT pg_advisory_unlock(hashtext($1))', [`mia:${task}`]);
    }
  } finally {
    client.release();
  }
}
