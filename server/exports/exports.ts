/**
 * Bulk exports for data engineers: the latest result of every scan matching the filters,
 * written once to a file in the chosen format (the same serializers as the API), optionally
 * de-identified. The file is written to a temporary name, fsynced and renamed before its record
 * is committed, so a listed export always has its complete file.
 */
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from 'node:fs';
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
const PAGE = 500;

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

async function collectResults(deps: ExportDeps, filters: ExportFilters): Promise<ScanResultV11[]> {
  const results: ScanResultV11[] = [];
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
      { afterId, limit: PAGE },
    );
    results.push(...page.items);
    if (page.nextAfterId === null) return results;
    afterId = page.nextAfterId;
  }
}

function render(format: ExportFormat, header: Record<string, string | boolean | number>, items: ScanResultV11[]): string {
  switch (format) {
    case 'csv':
      return csvDocument(scanResultSerializer, items);
    case 'xml':
      return xmlDocument('export', header, scanResultSerializer, items);
    case 'json':
      return JSON.stringify({ ...header, scan_results: items }, null, 2) + '\n';
  }
}

/** A partial export is named with its writer's pid, so the clean-up at open knows a dead one's. */
export function exportPartialWriterPid(name: string): number | null {
  const match = /\.(\d+)\.partial$/.exec(name);
  return match?.[1] ? Number(match[1]) : null;
}

export const isExportPartialName = (name: string): boolean => name.endsWith('.partial');

function writeDurably(path: string, content: string): void {
  const temporary = `${path}.${process.pid}.partial`;
  const fd = openSync(temporary, 'w', PRIVATE_FILE_MODE);
  try {
    const bytes = Buffer.from(content);
    for (let off = 0; off < bytes.length; ) off += writeSync(fd, bytes, off);
    fsyncSync(fd);
  } catch (err) {
    // A full disk is the likely cause: what was written would only keep holding its space.
    closeSync(fd);
    rmSync(temporary, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(temporary, path);
}

export async function createExport(
  deps: ExportDeps,
  caller: AuthContext,
  input: { format: ExportFormat; filters: ExportFilters; deidentify: boolean },
): Promise<ExportRecord> {
  const publicId = newPublicId('exp');
  const at = deps.clock.now().toISOString();
  const pseudonyms = input.deidentify ? await createPseudonymizer(deps.db) : undefined;
  const results = await collectResults(deps, input.filters);
  const items = pseudonyms ? results.map((result) => deidentify(result, pseudonyms)) : results;
  const header = { export_id: publicId, generated_at: at, deidentified: input.deidentify, row_count: items.length };
  const content = render(input.format, header, items);
  const fileName = `${publicId}.${EXPORT_EXTENSION[input.format]}`;
  mkdirSync(exportsDir(deps.dataDir), { recursive: true, mode: PRIVATE_DIR_MODE });
  writeDurably(join(exportsDir(deps.dataDir), fileName), content);
  await insertExport(deps.db, {
    publicId,
    createdBy: caller.userRef,
    format: input.format,
    filters: JSON.stringify(input.filters),
    deidentified: input.deidentify,
    rowCount: items.length,
    fileName,
    sizeBytes: Buffer.byteLength(content),
    sha256: createHash('sha256').update(content).digest('hex'),
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
