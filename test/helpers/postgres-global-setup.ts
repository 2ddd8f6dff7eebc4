/**
 * vitest globalSetup: one throwaway PostgreSQL cluster for the whole run (a cluster takes about a
 * second to start; a database on it, milliseconds). Test files get their own database with
 * freshPostgresDatabase() from ./postgres-cluster.ts.
 */
import type { TestProject } from 'vitest/node';
import { startPostgresCluster, type PostgresCluster } from './postgres-cluster.ts';

// vitest runs globalSetup once per project (main, hostile, faults and the root), each with its own
// module instance, all in this one process: share the cluster through the process, counted.
const SHARED = Symbol.for('mia.test.postgres-cluster');
type Shared = { cluster: Promise<PostgresCluster>; users: number };
const holder = globalThis as typeof globalThis & { [SHARED]?: Shared };

export async function setup(project: TestProject): Promise<void> {
  const shared = (holder[SHARED] ??= { cluster: startPostgresCluster(), users: 0 });
  shared.users++;
  project.provide('postgresUrl', (await shared.cluster).superuserUrl);
}

export async function teardown(): Promise<void> {
  const shared = holder[SHARED];
  if (!shared || --shared.users > 0) return;
  delete holder[SHARED];
  // A cluster that failed to start has already cleaned up, and setup reported why.
  const cluster = await shared.cluster.catch(() => null);
  await cluster?.stop();
}
