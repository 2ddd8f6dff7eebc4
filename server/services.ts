/** What domain code needs from its host: the database, the clock, the data folder, the log, and
 * this process as an owner of jobs. */
import type { Clock } from '#server/clock.ts';
import type { ProgressBus } from '#server/events/progress-bus.ts';
import type { JobNode } from '#server/jobs/node.ts';
import type { ServerConfig } from '#server/config.ts';
import type { Logger } from '#server/log.ts';
import type { Database } from '#server/store/database.ts';
import type { Replica } from '#server/sync/replica.ts';

export type Services = {
  db: Database;
  clock: Clock;
  dataDir: string;
  config: ServerConfig;
  log: Logger;
  node: JobNode;
  /** Job progress as runners report it, heard on every node. */
  progress: ProgressBus;
  /** This data folder as a party to sync: syncable writes record their changes through it. */
  replica: Replica;
};
