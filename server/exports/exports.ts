/**
 * Bulk exports for data engineers: the latest result of every scan matching the filters,
 * written once to a file in the chosen format (the same serializers as the API), optionally
 * de-identified. The file is streamed page by page to a temporary name, fsynced and renamed
 * before its record is committed, so a listed export always has its complete file and a large
 * one never sits in memory (issue 15: 1,000,000 findings under 200 MB of RSS).
 */
import { createHash } from 'node:crypto';
import { mkdir, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { ExportFormat } from '#common/vocabulary.ts';
import type { ExportFilters, ExportRecord } from '#server/api/schemas.ts';
import { exportFilters } from '#server/api/schemas.ts';
import type { AuthContext } from '#server/auth/authenticate.ts';
import { holdsScope } from '#server/auth/scopes.ts';
import type { Clock } from '#server/clock.ts';
import { notFound } from '#server/errors.ts';
import { documentParts, PAGE_SCANS, renderedPages, type DocumentHeader, type DocumentParts, type PageRange, type RenderedPage } from '#server/exports/export-pages.ts';
import { renderInWorkers, type ParallelExport } from '#server/exports/parallel-export.ts';
import { pseudonymizerOf, pseudonymSecret } from '#server/exports/pseudonyms.ts';
import type { Database } from '#server/store/database.ts';
import { scanIdSpan } from '#server/store/results.ts';
import { isSqlite } from '#server/store/sqlite.ts';
import type { ExportRow } from '#server/store/exports.ts';
import { findExport, insertExport, listExports as listExportRows } from '#server/store/exports.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';
import { newPublicId } from '#server/store/public-id.ts';

export type ExportDeps = { db: Database; clock: Clock; dataDir: string; config: { exportWorkers: number } };

export const EXPORT_EXTENSION: Record<ExportFormat, string> = { csv: 'csv', xml: 'xml', json: 'json' };
/**
 * A store of at least this many scans (on SQLite, with config.exportWorkers of 2 or more) has its
 * exports rendered by worker threads: starting them costs ~0.2 s, what one thread renders of
 * 7,000 scans. One worker alone is no faster than the event loop and costs its memory, so it is
 * not used.
 */
const PARALLEL_MIN_SCANS = 7000;

/** A test's choice of threads over the configured ones. */
export type ExportTuning = { workers?: number; parallelMinScans?: number; onWorker?: ParallelExport['onWorker'] };

export function exportsDir(dataDir: string): string {
  return join(dataDir, 'exports');
}

export function toExportRecord(row: ExportRow): ExportRecord {
  return {
    id: row.public_id,
    format: row.format,
    filters: exportFilters.parse(JSON.parse(row.filters)),
    deidentified: row.deidentified === 1,
    status: row.status,
    row_count: row.row_count,
    size_bytes: row.size_bytes,
    sha256: row.sha256,
    created_by: row.creator_public_id,
    created_at: row.created_at,
    download_url: `/v1/exports/${row.public_id}/download`,
  };
}


/** A partial export is named with its writer's pid, so the clean-up at open knows a dead one's. */
export function exportPartialWriterPid(name: string): number | null {
  const match = /\.(\d+)\.partial$/.exec(name);
  return match?.[1] ? Number(match[1]) : null;
}

export const isExportPartialName = (name: string): boolean => name.endsWith('.partial');

type Written = { rowCount: number; sizeBytes: number; sha256: string };

/**
 * Writes the document page by page to a temporary name, then fsyncs and renames it: a listed
 * export always has its complete file. One write is in flight while the next page is read and
 * serialized, so disk and CPU work at once (awaiting each write left the process idle a fifth of
 * an export's time, by CPU profile); a page waits for the write before it, so the disk sets the
 * pace and memory holds at most two pages.
 */
/** A write may take fewer bytes than given (interrupted, nearly full disk): the rest follows. */
async function writeAll(file: FileHandle, bytes: Uint8Array): Promise<void> {
  for (let done = 0; done < bytes.length; ) {
    const { bytesWritten } = await file.write(bytes, done, bytes.length - done);
    if (bytesWritten === 0) throw new Error('export file write made no progress');
    done += bytesWritten;
  }
}

async function writeExportFile(path: string, parts: DocumentParts, header: DocumentHeader, pages: AsyncIterable<RenderedPage>): Promise<Written> {
  const temporary = `${path}.${process.pid}.partial`;
  const file = await open(temporary, 'w', PRIVATE_FILE_MODE);
  const hash = createHash('sha256');
  let sizeBytes = 0;
  let rowCount = 0;
  let inFlight: Promise<unknown> = Promise.resolve();
  const write = async (bytes: Buffer, written?: () => void) => {
    if (bytes.length === 0) return written?.();
    hash.update(bytes);
    sizeBytes += bytes.length;
    await inFlight;
    inFlight = writeAll(file, bytes).then(written);
    // Awaited before the next write or at the end; until then a failure must not count as unhandled.
    inFlight.catch(() => undefined);
  };
  try {
    const between = Buffer.from(parts.between);
    await write(Buffer.from(parts.head(header)));
    for await (const page of pages) {
      // Written apart, not joined: a joined copy would be memory this thread allocates per page.
      if (rowCount > 0) await write(between);
      await write(page.bytes, page.written);
      rowCount += page.rows;
    }
    await write(Buffer.from(parts.tail(rowCount)));
    await inFlight;
    await file.sync();
  } catch (err) {
    // A full disk is the likely cause: what was written would only keep holding its space.
    await inFlight.catch(() => undefined);
    await file.close();
    await rm(temporary, { force: true });
    throw err;
  }
  await file.close();
  await rename(temporary, path);
  return { rowCount, sizeBytes, sha256: hash.digest('hex') };
}

/**
 * The scans of an export cut into ranges of a page's worth of row ids, for worker threads; null
 * when one thread is better. Ranges of ids, not of the matching scans: finding those would read
 * them all before the workers start (333,334 scans: 0.37 s); a filter leaves some ranges with few
 * or none, which cost a statement each. Scans added after this are not in the export.
 */
async function parallelRanges(deps: ExportDeps, input: { format: ExportFormat; filters: ExportFilters }, workers: number, minScans: number): Promise<Required<PageRange>[] | null> {
  if (!isSqlite(deps.db) || workers < 2) return null;
  // One scan or one patient's: a few pages at most, which one thread reads before workers start.
  if (input.filters.scan_id !== undefined || input.filters.patient_id !== undefined) return null;
  const { format } = input;
  const span = await scanIdSpan(deps.db);
  if (!span || span.last - span.first + 1 < minScans) return null;
  const size = PAGE_SCANS[format];
  const ranges: Required<PageRange>[] = [];
  for (let after = span.first - 1; after < span.last; after += size) ranges.push({ afterId: after, throughId: Math.min(after + size, span.last) });
  return ranges;
}

export async function createExport(
  deps: ExportDeps,
  caller: AuthContext,
  input: { format: ExportFormat; filters: ExportFilters; deidentify: boolean },
  tuning: ExportTuning = {},
): Promise<ExportRecord> {
  const publicId = newPublicId('exp');
  const at = deps.clock.now().toISOString();
  const secret = input.deidentify ? await pseudonymSecret(deps.db) : null;
  const fileName = `${publicId}.${EXPORT_EXTENSION[input.format]}`;
  await mkdir(exportsDir(deps.dataDir), { recursive: true, mode: PRIVATE_DIR_MODE });
  const workers = tuning.workers ?? deps.config.exportWorkers;
  const ranges = await parallelRanges(deps, input, workers, tuning.parallelMinScans ?? PARALLEL_MIN_SCANS);
  const pages = ranges
    ? renderInWorkers({ dataDir: deps.dataDir, format: input.format, filters: input.filters, pseudonymSecret: secret, ranges, workers, onWorker: tuning.onWorker })
    : renderedPages(deps, input.format, input.filters, { afterId: 0 }, secret === null ? undefined : pseudonymizerOf(secret));
  const header = { export_id: publicId, generated_at: at, deidentified: input.deidentify };
  const path = join(exportsDir(deps.dataDir), fileName);
  const written = await writeExportFile(path, documentParts(input.format), header, pages);
  // A file no record names is never listed, downloaded or removed, and may hold patient data:
  // if the record cannot be stored (a full disk, a busy database), the file goes too.
  await insertExport(deps.db, {
    publicId,
    createdBy: caller.userRef,
    format: input.format,
    filters: JSON.stringify(input.filters),
    deidentified: input.deidentify,
    rowCount: written.rowCount,
    fileName,
    sizeBytes: written.sizeBytes,
    sha256: written.sha256,
    at,
  }).catch(async (err: unknown) => {
    await rm(path, { force: true });
    throw err;
  });
  return await getExport(deps, caller, publicId);
}

/** Holders of read:exports see every export; others see only their own (404 for the rest). */
function visibleTo(caller: AuthContext, row: ExportRow): boolean {
  return row.created_by === caller.userRef || holdsScope(caller.scopes, 'read:exports');
}

async function getExportRow(deps: ExportDeps, caller: AuthContext, exportId: string): Promise<ExportRow> {
  const row = await findExport(deps.db, exportId);
  if (!row || !visibleTo(caller, row)) throw notFound('Export', exportId);
  return row;
}

export async function getExport(deps: ExportDeps, caller: AuthContext, exportId: string): Promise<ExportRecord> {
  return toExportRecord(await getExportRow(deps, caller, exportId));
}

export async function listExports(deps: ExportDeps, caller: AuthContext, page: PageRequest): Promise<Page<ExportRecord>> {
  const createdBy = holdsScope(caller.scopes, 'read:exports') ? undefined : caller.userRef;
  const rows = await listExportRows(deps.db, { createdBy }, page);
  return { items: rows.items.map(toExportRecord), nextAfterId: rows.nextAfterId };
}

export async function exportFile(
  deps: ExportDeps,
  caller: AuthContext,
  exportId: string,
): Promise<{ path: string; fileName: string; format: ExportFormat }> {
  const row = await getExportRow(deps, caller, exportId);
  if (row.status !== 'ready' || !row.file_name) throw notFound('Export file', exportId);
  return { path: join(exportsDir(deps.dataDir), row.file_name), fileName: `mia-export-${row.file_name}`, format: row.format };
}
