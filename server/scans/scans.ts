/** Reading scans and changing their status. */
import { mapInOrder } from '#server/in-order.ts';
import type { Scan, ScanResultV11 } from '#server/api/schemas.ts';
import type { Clock } from '#server/clock.ts';
import { MiaError, notFound } from '#server/errors.ts';
import type { Database } from '#server/store/database.ts';
import { inTransaction } from '#server/store/database.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import type { ResultFilter, ScanFilter, ScanRow } from '#server/store/scans.ts';
import { findScan, listScans as listScanRows, listScansWithResults } from '#server/store/scans.ts';
import { loadSliceIndex } from '#server/findings/places.ts';
import { clientRequested } from '#server/scans/lifecycle.ts';
import { loadLatestAnalyses, toScan, toScanResult } from '#server/scans/scan-views.ts';
import { needsSlices } from '#server/scans/triage.ts';

export type ScanDeps = { db: Database; clock: Clock };

export async function getScanRow(deps: ScanDeps, scanId: string): Promise<ScanRow> {
  const row = await findScan(deps.db, scanId);
  if (!row) throw notFound('Scan', scanId);
  return row;
}

export async function withSummaries(deps: ScanDeps, rows: readonly ScanRow[]): Promise<Scan[]> {
  const { analyses, findings } = await loadLatestAnalyses(deps.db, rows);
  return mapInOrder(rows, async (row) => {
    if (row.latest_analysis_ref === null) return toScan(row, undefined, undefined);
    const analysis = analyses.get(row.latest_analysis_ref);
    const own = findings.get(row.latest_analysis_ref) ?? [];
    // The slice index costs a query: only scans whose findings set a priority need it.
    const slices = analysis && needsSlices(analysis, own) ? await loadSliceIndex(deps.db, row.id) : undefined;
    return toScan(row, own, analysis, slices);
  });
}

export async function listScans(deps: ScanDeps, filter: ScanFilter, page: PageRequest): Promise<Page<Scan>> {
  const rows = await listScanRows(deps.db, filter, page);
  return { items: await withSummaries(deps, rows.items), nextAfterId: rows.nextAfterId };
}

export async function getScan(deps: ScanDeps, scanId: string): Promise<Scan> {
  const [scan] = await withSummaries(deps, [await getScanRow(deps, scanId)]);
  if (!scan) throw notFound('Scan', scanId);
  return scan;
}

/** Applies a client's status request; the check and the write share one transaction so two
 * concurrent requests cannot both pass the check. */
export async function requestScanStatus(deps: ScanDeps, scanId: string, requested: string): Promise<{ scan: Scan; from: string }> {
  return await inTransaction(deps.db, async (tx) => {
    const row = await getScanRow({ ...deps, db: tx }, scanId);
    await clientRequested(tx, { ref: row.id, status: row.status }, requested, deps.clock.now().toISOString());
    return { scan: await getScan({ ...deps, db: tx }, scanId), from: row.status };
  });
}

export async function listResults(deps: ScanDeps, filter: ResultFilter, page: PageRequest): Promise<Page<ScanResultV11>> {
  const rows = await listScansWithResults(deps.db, filter, page);
  const { analyses, findings } = await loadLatestAnalyses(deps.db, rows.items);
  const items = (await mapInOrder(rows.items, async (row) => {
    const analysis = row.latest_analysis_ref === null ? undefined : analyses.get(row.latest_analysis_ref);
    if (!analysis) return [];
    return [toScanResult(row, analysis, findings.get(analysis.id) ?? [], filter, await loadSliceIndex(deps.db, row.id))];
  })).flat();
  return { items, nextAfterId: rows.nextAfterId };
}

export async function getLatestResult(deps: ScanDeps, scanId: string): Promise<ScanResultV11> {
  const row = await getScanRow(deps, scanId);
  const { analyses, findings } = await loadLatestAnalyses(deps.db, [row]);
  const analysis = row.latest_analysis_ref === null ? undefined : analyses.get(row.latest_analysis_ref);
  if (!analysis) {
    throw new MiaError('not_found', 'This scan has no analysis result yet', `scan status is ${row.status}; request analysis by setting status queued`);
  }
  return toScanResult(row, analysis, findings.get(analysis.id) ?? [], {}, await loadSliceIndex(deps.db, row.id));
}
