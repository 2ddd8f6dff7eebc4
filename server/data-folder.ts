/**
 * Opening a data folder: its database, this process's node among those that run jobs on it, and
 * what a killed mia left behind in it. Every mia process that opens a folder (the server, each
 * CLI command) comes through here, so crash leftovers (patient data in temporary files, jobs
 * shown running for a dead process) are cleared by whichever process looks next, not only by a
 * server start.
 */
import { systemClock, type Clock } from '#server/clock.ts';
import { clearCrashLeftovers } from '#server/imports/leftovers.ts';
import { registerNode, type JobNode } from '#server/jobs/node.ts';
import type { Logger } from '#server/log.ts';
import type { Database } from '#server/store/database.ts';
import { openDatabase } from '#server/store/sqlite.ts';
import { openReplica, type Replica } from '#server/sync/replica.ts';

export type DataFolder = {
  db: Database;
  node: JobNode;
  /** This folder as a party to sync: its device id and clock. */
  replica: Replica;
  /** Leaves the node (its row goes) and closes the database. */
  close(): Promise<void>;
};

/**
 * The data folder's database: its own SQLite file, or a hub's PostgreSQL when `databaseUrl` is
 * given (the folder then holds the archive, exports and logs only, shared by the hub's nodes).
 */
export async function openDataFolder(
  dataDir: string,
  options: { clock?: Clock; log?: Logger; databaseUrl?: string | null } = {},
): Promise<DataFolder> {
  const clock = options.clock ?? systemClock;
  // pg is loaded only for a hub: every CLI command opens a data folder, most of them on SQLite.
  const db = options.databaseUrl ? await (await import('#server/store/postgres.ts')).openPostgres(options.databaseUrl) : openDatabase(dataDir);
  let node: JobNode | undefined;
  let replica: Replica;
  try {
    node = await registerNode(db, clock);
    await clearCrashLeftovers({ db, clock, dataDir, log: options.log, node, sharedFolder: db.dialect === 'postgres' });
    replica = await openReplica(db, clock);
  } catch (err) {
    await node?.stop();
    await db.close();
    throw err;
  }
  const opened = node;
  return {
    db,
    node: opened,
    replica,
    async close() {
      await opened.stop();
      await db.close();
    },
  };
}
