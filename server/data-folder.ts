/**
 * Opening a data folder: its database, and what a killed mia left behind in it. Every mia
 * process that opens a folder (the server, each CLI command) comes through here, so crash
 * leftovers (patient data in temporary files, jobs shown running for a dead process) are
 * cleared by whichever process looks next, not only by a server start.
 */
import { systemClock, type Clock } from '#server/clock.ts';
import { clearCrashLeftovers } from '#server/imports/leftovers.ts';
import type { Logger } from '#server/log.ts';
import { openDatabase, type Database } from '#server/store/database.ts';

export function openDataFolder(dataDir: string, options: { clock?: Clock; log?: Logger } = {}): Database {
  const db = openDatabase(dataDir);
  try {
    clearCrashLeftovers({ db, clock: options.clock ?? systemClock, dataDir, log: options.log });
  } catch (err) {
    db.close();
    throw err;
  }
  return db;
}
