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
import type { ExportFilters, ExportRecord, ScanResultV11 } from '#server/api/schemas.ts';
import { exportFilters } from '#server/api/schemas.ts';
import type { AuthContext } from '#server/auth/authenticate.ts';
import { holdsScope } from '#server/auth/scopes.ts';
import type { Clock } from '#server/clock.ts';
import { notFound } from '#server/errors.ts';
import { createPseudonymizer, type Pseudonymizer } from '#server/exports/pseudonyms.ts';
import { csvDocument, xmlDocument } from '#server/formats/documents.ts';
import { xmlElement, type XmlValue } from '#server/formats/xml.ts';
import { scanResultSerializer } from '#server/formats/serializers.ts';
import { listResults } from '#server/scans/scans.ts';
import type { Database } from '#server/store/database.ts';
import type { ExportRow } from '#server/store/exports.ts';
import { findExport, insertExport, listExports as listExportRows } from '#server/store/exports.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';
import { newPublicId } from '#server/store/public-id.ts';

export type ExportDeps = { db: Database; clock: Clock; dataDir: string };

export const EXPORT_EXTENSION: Record<ExportFormat, string> = { csv: 'csv', xml: 'xml', json: 'json' };
// Scans per page read (0-6 findings each). Smaller pages measured better on both counts at
// 100,000 scans: CSV at 1,000 a page 7.1 s and +107 MB peak RSS, 250 5.7 s and +71 MB, 100
// 4.2 s and +53 MB (young objects die young instead of being promoted). JSON and XML write about
// three times the text per scan, so a quarter of the scans keep pages alike in size: JSON at 100
// peaked 86 MB above the process's start, at 25 46 MB, in the same time.
const PAGE: Record<ExportFormat, number> = { csv: 100, json: 25, xml: 25 };

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

function deidentify(result: ScanResultV11, pseudonyms: Pseudonymizer): ScanResultV11 {
  return {
    ...result,
    patient_id: pseudonyms.patientId(result.patient_id),
    scan_id: pseudonyms.uid(result.scan_id),
    findings: result.findings.map((finding) => ({ ...finding, id: pseudonyms.recordId(finding.id), instance_uid: pseudonyms.uid(finding.instance_uid) })),
    lesions: result.lesions.map((lesion) => ({ ...lesion, id: pseudonyms.recordId(lesion.id), finding_ids: lesion.finding_ids.map((id) => pseudonyms.recordId(id)) })),
    analysis: { ...result.analysis, id: pseudonyms.recordId(result.analysis.id) },
  };
}

/**
 * The matching results, a page at a time: one indexed range scan per page (keyset on the scan
 * id), so an export of a million findings holds one page in memory, never the whole list.
 */
async function* matchingResults(deps: ExportDeps, filters: ExportFilters, pageSize: number): AsyncGenerator<ScanResultV11[]> {
  let afterId = 0;
  for (;;) {
    const page = await listResults(
      deps,
      {
        scanId: filters.scan_id,
        patientId: filters.patient_id,
        modality: filters.modality,
        label: filters.label,
        minConfidence: filters.min_confidence,
      },
      { afterId, limit: pageSize },
    );
    if (page.items.length > 0) yield page.items;
    if (page.nextAfterId === null) return;
    afterId = page.nextAfterId;
  }
}

type Header = Record<string, string | boolean | number>;

/**
 * A format's document in three parts, so pages can be written as they are read. The row count
 * is known only at the end: JSON and XML carry it after the results (JSON readers do not care
 * where a key is; XML ones find the element by name).
 */
type DocumentWriter = { head(): string; page(items: readonly ScanResultV11[], first: boolean): string; tail(rowCount: number): string };

function documentWriter(format: ExportFormat, header: Header): DocumentWriter {
  switch (format) {
    case 'csv': {
      // The header line alone, then each page's lines without it: toCsv's output minus its first line.
      const headLine = csvDocument(scanResultSerializer, []);
      return {
        head: () => headLine,
        page: (items) => csvDocument(scanResultSerializer, items).slice(headLine.length),
        tail: () => '',
      };
    }
    case 'xml': {
      // The document around an empty collection, split where the collection is.
      const collection = scanResultSerializer.collection;
      const itemNames = { ...scanResultSerializer.xmlItemNames, [collection]: scanResultSerializer.item };
      return {
        head: () => xmlDocument('export', header, scanResultSerializer, []).replace(new RegExp(`<${collection}></${collection}>\\n?</export>\\n$`), `<${collection}>`),
        page: (items) => items.map((item) => xmlElement(scanResultSerializer.item, item as unknown as XmlValue, itemNames)).join(''),
        tail: (rowCount) => `</${collection}>${xmlElement('row_count', rowCount, itemNames)}</export>\n`,
      };
    }
    case 'json': {
      const open = JSON.stringify(header, null, 2).replace(/\n}$/, ',\n  "scan_results": [');
      // A page stringified where the document would hold it, then unwrapped: the same text as
      // one JSON.stringify of the whole document, with no per-item re-indenting.
      const wrapper = { start: '{\n  "scan_results": [', end: '\n  ]\n}' };
      return {
        head: () => open,
        page: (items, first) => (first ? '' : ',') + JSON.stringify({ scan_results: items }, null, 2).slice(wrapper.start.length, -wrapper.end.length),
        tail: (rowCount) => `${rowCount > 0 ? '\n  ' : ''}],\n  "row_count": ${rowCount}\n}\n`,
      };
    }
  }
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

async function writeExportFile(path: string, writer: DocumentWriter, pages: AsyncIterable<ScanResultV11[]>): Promise<Written> {
  const temporary = `${path}.${process.pid}.partial`;
  const file = await open(temporary, 'w', PRIVATE_FILE_MODE);
  const hash = createHash('sha256');
  let sizeBytes = 0;
  let rowCount = 0;
  let inFlight: Promise<unknown> = Promise.resolve();
  const write = async (text: string) => {
    if (text.length === 0) return;
    const bytes = Buffer.from(text);
    hash.update(bytes);
    sizeBytes += bytes.length;
    await inFlight;
    inFlight = writeAll(file, bytes);
    // Awaited before the next write or at the end; until then a failure must not count as unhandled.
    inFlight.catch(() => undefined);
  };
  try {
    await write(writer.head());
    for await (const items of pages) {
      await write(writer.page(items, rowCount === 0));
      rowCount += items.length;
    }
    await write(writer.tail(rowCount));
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

export async function createExport(
  deps: ExportDeps,
  caller: AuthContext,
  input: { format: ExportFormat; filters: ExportFilters; deidentify: boolean },
): Promise<ExportRecord> {
  const publicId = newPublicId('exp');
  const at = deps.clock.now().toISOString();
  const pseudonyms = input.deidentify ? await createPseudonymizer(deps.db) : undefined;
  const fileName = `${publicId}.${EXPORT_EXTENSION[input.format]}`;
  await mkdir(exportsDir(deps.dataDir), { recursive: true, mode: PRIVATE_DIR_MODE });
  const pages = async function* () {
    for await (const items of matchingResults(deps, input.filters, PAGE[input.format])) yield pseudonyms ? items.map((result) => deidentify(result, pseudonyms)) : items;
  };
  const written = await writeExportFile(join(exportsDir(deps.dataDir), fileName), documentWriter(input.format, { export_id: publicId, generated_at: at, deidentified: input.deidentify }), pages());
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
