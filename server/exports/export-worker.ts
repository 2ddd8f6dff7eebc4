/**
 * Worker thread entry: its own connection to the workstation's SQLite file, rendering the ranges
 * of an export that parallel-export.ts hands it. Reading and serializing results is all of an
 * export's CPU (better-sqlite3 building rows, the serializers), so two of these make a large
 * export on two cores, while the server's event loop only writes the pages in order.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { systemClock } from '#server/clock.ts';
import { documentParts, pageTexts } from '#server/exports/export-pages.ts';
import type { ExportWorkerData, FromExportWorker, ToExportWorker } from '#server/exports/export-worker-protocol.ts';
import { pseudonymizerOf } from '#server/exports/pseudonyms.ts';
import { codeOf } from '#server/storage-errors.ts';
import { openDatabase } from '#server/store/sqlite.ts';

if (!parentPort) throw new Error('export-worker.ts runs as a worker thread');
const port = parentPort;
const { dataDir, nativeBinding, format, filters, pseudonymSecret } = workerData as ExportWorkerData;
const EXPORT_CACHE_KIB = 1024;
const post = (message: FromExportWorker): void => port.postMessage(message);

const failure = (err: unknown, id: number): FromExportWorker => ({ type: 'error', id, message: err instanceof Error ? err.message : String(err), code: codeOf(err) });

let db: ReturnType<typeof openDatabase>;
try {
  // Each range's rows are read once, in id order: SQLite's default 16 MB cache per worker was
  // 30 MB of an export's peak for nothing (CSV of 1,000,000 findings, two workers: 228-230 MB
  // peak RSS with it, 194-196 MB with 1 MB, the same 4.2-4.6 s).
  db = openDatabase(dataDir, { nativeBinding, cacheKib: EXPORT_CACHE_KIB });
} catch (err) {
  // Said here: an error thrown out of a worker reaches the export without its message.
  post(failure(err, -1));
  process.exit(1);
}
const deps = { db, clock: systemClock };
const pseudonyms = pseudonymSecret === null ? undefined : pseudonymizerOf(pseudonymSecret);
const separator = documentParts(format).between;

// The buffers ranges are sent in, back from the export once written and filled again: a buffer
// made for each range and freed by the export's thread was a gigabyte of memory outside its heap
// per JSON export of a million findings, which that thread paid for in full collections of its
// own heap, one every ~60 ms (152 of them, ~2 s of its CPU, the longest pauses 12-15 ms).
const MIN_BUFFER = 256 * 1024;
const MAX_KEPT = 32;
const spare: ArrayBuffer[] = [];

/** `text` as UTF-8 at the start of a spare buffer that holds it, or of a new one. */
function encoded(text: string): Uint8Array {
  const length = Buffer.byteLength(text);
  const at = spare.findIndex((b) => b.byteLength >= length);
  const buffer = at >= 0 ? spare.splice(at, 1)[0]! : new ArrayBuffer(Math.max(MIN_BUFFER, Math.ceil(length * 1.25)));
  const written = Buffer.from(buffer).write(text);
  return new Uint8Array(buffer, 0, written);
}

// One range at a time, in the order asked: the export waits on the earliest.
let work: Promise<void> = Promise.resolve();

port.on('message', (message: ToExportWorker) => {
  if (message.type === 'reuse') {
    // A bound, not a size: the buffers are at most the ranges asked ahead, and all go with the thread.
    if (spare.length < MAX_KEPT) spare.push(message.buffer);
    return;
  }
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
      const texts: string[] = [];
      let rows = 0;
      for await (const page of pageTexts(deps, format, filters, { afterId, throughId }, pseudonyms)) {
        texts.push(page.text);
        rows += page.rows;
      }
      const bytes = encoded(texts.join(separator));
      // Moved, not copied: the export hands the buffer back once the bytes are written.
      port.postMessage({ type: 'range', id, bytes, rows } satisfies FromExportWorker, [bytes.buffer as ArrayBuffer]);
    } catch (err) {
      post(failure(err, id));
    }
  });
});

post({ type: 'ready' });
