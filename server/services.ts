/** What domain code needs from its host: the database, the clock, the data folder, the log. */
import type { Clock } from '#server/clock.ts';
import type { ServerConfig } from '#server/config.ts';
import type { Logger } from '#server/log.ts';
import type { Database } from '#server/store/database.ts';

export type Services = {
  db: Database;
  clock: Clock;
  dataDir: string;
  config: ServerConfig;
  log: Logger;
};
