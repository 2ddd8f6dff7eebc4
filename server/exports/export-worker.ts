/**
 * Worker thread entry: its own connection to the workstation's SQLite file, rendering the ranges
 * of an export that parallel-export.ts hands it. Reading and serializing results is all of an
 * export's CPU (better-sqlite3 building rows, the serializers), so two of these make a large
 * export on two cores, while the server's event loop only writes the pages in order.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '#server/clock.ts';
import { documentParts, renderedPages } from '#server/exports/export-pages.ts';
import type { ExportWorkerData, FromExportWorker, ToExportWorker } from '#server/exports/export-worker-protocol.ts';
import { pseudonymizerOf } from '#server/exports/pseudonyms.ts';
import { codeOf } from '#server/storage-errors.ts';
import { openDatabase } from '#server/store/sqlite.ts';

if (!parentPort) throw new Error('export-worker.ts runs as a worker thread');
const port = parentPort;
const { dataDir, nativeBinding, format, filters, pseudonymSecret } = workerData as ExportWorkerData;
const post = (message: FromExportWorker): void => port.postMessage(message);

const failure = (err: unknown, id: number): FromExportWorker => ({ type: 'error', id, message: err instanceof Error ? err.message : String(err), code: codeOf(err) });

let db: ReturnType<typeof openDatabase>;
try {
  db = openDatabase(dataDir, nativeBinding);
} catch (err) {
  // Said here: an error thrown out of a worker reaches the export without its message.
  post(failure(err, -1));
  process.exit(1);
}
const deps = { db, clock: systemClock };
const pseudonyms = pseudonymSecret === null ? undefined : pseudonymizerOf(pseudonymSecret);
const separator = Buffer.from(documentParts(format).between);

// One range at a time, in the order asked: the export waits on the earliest.
let work: Promise<void> = Promise.resolve();

port.on('message', (message: ToExportWorker) => {
  if (message.type === 'close') {
    work = work.then(async () => {
      await db.close();
      post({ type: 'closed' });
    });
    return;
  }
  const { id, afterId, throughId } = message;
  work = work.then(async () => {
    try {
      const parts: Buffer[] = [];
      let rows = 0;
      for await (const page of renderedPages(deps, format, filters, { afterId, throughId }, pseudonyms)) {
        if (parts.length > 0) parts.push(separator);
        parts.push(page.bytes);
        rows += page.rows;
      }
      const bytes = parts.length === 1 ? parts[0]! : Buffer.concat(parts);
      // Moved, not copied, when the bytes are the whole of their memory (not a slice of Node's pool).
      const own = bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength;
      port.postMessage({ type: 'range', id, bytes, rows } satisfies FromExportWorker, own ? [bytes.buffer as ArrayBuffer] : []);
    } catch (err) {
      post(failure(err, id));
    }
  });
});

post({ type: 'ready' });
