/** Reading scans and changing their status. */
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

export function getScanRow(deps: ScanDeps, scanId: string): ScanRow {
  const row = findScan(deps.db, scanId);
  if (!row) throw notFound('Scan', scanId);
  return row;
}

export function withSummaries(deps: ScanDeps, rows: readonly ScanRow[]): Scan[] {
  const { analyses, findings } = loadLatestAnalyses(deps.db, rows);
  return rows.map((row) => {
    if (row.latest_analysis_ref === null) return toScan(row, undefined, undefined);
    const analysis = analyses.get(row.latest_analysis_ref);
    const own = findings.get(row.latest_analysis_ref) ?? [];
    // The slice index costs a query: only scans whose findings set a priority need it.
    const slices = analysis && needsSlices(analysis, own) ? loadSliceIndex(deps.db, row.id) : undefined;
    return toScan(row, own, analysis, slices);
  });
}

export function listScans(deps: ScanDeps, filter: ScanFilter, page: PageRequest): Page<Scan> {
  const rows = listScanRows(deps.db, filter, page);
  return { items: withSummaries(deps, rows.items), nextAfterId: rows.nextAfterId };
}

export function getScan(deps: ScanDeps, scanId: string): Scan {
  const [scan] = withSummaries(deps, [getScanRow(deps, scanId)]);
  if (!scan) throw notFound('Scan', scanId);
  return scan;
}

/** Applies a client's status request; the check and the write share one transaction so two
 * concurrent requests cannot both pass the check. */
export function requestScanStatus(deps: ScanDeps, scanId: string, requested: string): { scan: Scan; from: string } {
  return inTransaction(deps.db, () => {
    const row = getScanRow(deps, scanId);
    clientRequested(deps.db, { ref: row.id, status: row.status }, requested, deps.clock.now().toISOString());
    return { scan: getScan(deps, scanId), from: row.status };
  });
}

export function listResults(deps: ScanDeps, filter: ResultFilter, page: PageRequest): Page<ScanResultV11> {
  const rows = listScansWithResults(deps.db, filter, page);
  const { analyses, findings } = loadLatestAnalyses(deps.db, rows.items);
  const items = rows.items.flatMap((row) => {
    const analysis = row.latest_analysis_ref === null ? undefined : analyses.get(row.latest_analysis_ref);
    if (!analysis) return [];
    return [toScanResult(row, analysis, findings.get(analysis.id) ?? [], filter, loadSliceIndex(deps.db, row.id))];
  });
  return { items, nextAfterId: rows.nextAfterId };
}

export function getLatestResult(deps: ScanDeps, scanId: string): ScanResultV11 {
  const row = getScanRow(deps, scanId);
  const { analyses, findings } = loadLatestAnalyses(deps.db, [row]);
  const analysis = row.latest_analysis_ref === null ? undefined : analyses.get(row.latest_analysis_ref);
  if (!analysis) {
    throw new MiaError('not_found', 'This scan has no analysis result yet', `scan status is ${row.status}; request analysis by setting status queued`);
  }
  return toScanResult(row, analysis, findings.get(analysis.id) ?? [], {}, loadSliceIndex(deps.db, row.id));
}
