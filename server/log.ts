/**
 * Operational log: one JSON line per event in <data>/logs/mia.log. Callers pass only technical
 * fields (route pattern, status, request id, key id); never a key, a query string or a patient
 * value, which is why there is no free-form "log this object" entry point.
 */
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';

export type LogFields = Record<string, string | number | boolean | null>;
export type Logger = {
  info(event: string, fields?: LogFields): void;
  error(event: string, fields?: LogFields): void;
  close(): Promise<void>;
};

export function createFileLogger(dataDir: string, alsoStderr: boolean): Logger {
  const dir = join(dataDir, 'logs');
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  // An append stream keeps file I/O off the request path; close() flushes it on shutdown.
  const stream = createWriteStream(join(dir, 'mia.log'), { flags: 'a', mode: PRIVATE_FILE_MODE });
  const write = (level: string, event: string, fields: LogFields = {}): void => {
    const line = JSON.stringify({ at: new Date().toISOString(), level, event, ...fields }) + '\n';
    stream.write(line);
    if (alsoStderr) process.stderr.write(line);
  };
  return {
    info: (event, fields) => write('info', event, fields),
    error: (event, fields) => write('error', event, fields),
    close: () => new Promise((resolve) => stream.end(resolve)),
  };
}
