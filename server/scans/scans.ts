/** Reading scans and changing their status. */
import type { Scan, ScanResultV11 } from '#server/api/schemas.ts';
import type { Clock } from '#server/clock.ts';
import { MiaError, notFound } from '#server/errors.ts';
import type { Database } from '#server/store/database.ts';
import { inTransaction } from '#server/store/database.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import type { ResultFilter, ScanFilter, ScanRow } from '#server/store/scans.ts';
import { findScan, listScans as listScanRows, stampArchived } from '#server/store/scans.ts';
import { findResultFindings, listResultRows } from '#server/store/results.ts';
import { findSummaryAnalyses } from '#server/store/scan-summaries.ts';
import { recordChanges, type Replica } from '#server/sync/replica.ts';
import { formatHlc } from '#server/sync/hlc.ts';
import { loadSlicePlaces, NO_SLICES } from '#server/findings/places.ts';
import { clientRequested } from '#server/scans/lifecycle.ts';
import { loadLatestAnalyses, toScan, toScanResult } from '#server/scans/scan-views.ts';
import { triageFindings } from '#server/scans/triage.ts';

export type ScanDeps = { db: Database; clock: Clock };

export async function getScanRow(deps: ScanDeps, scanId: string): Promise<ScanRow> {
  const row = await findScan(deps.db, scanId);
  if (!row) throw notFound('Scan', scanId);
  return row;
}

export async function withSummaries(deps: ScanDeps, rows: readonly ScanRow[]): Promise<Scan[]> {
  const { analyses, findings } = await findSummaryAnalyses(deps.db, rows.flatMap((row) => (row.latest_analysis_ref === null ? [] : [row.latest_analysis_ref])));
  const latest = (row: ScanRow) => {
    if (row.latest_analysis_ref === null) return undefined;
    return { analysis: analyses.get(row.latest_analysis_ref), own: findings.get(row.latest_analysis_ref) ?? [] };
  };
  // The slice a triage reason names: that of the finding setting each scan's priority.
  const reasons = rows.flatMap((row) => {
    const result = latest(row);
    const top = result?.analysis === undefined ? undefined : triageFindings(result.analysis, result.own)[0];
    return top ? [{ scanRef: row.id, instanceUid: top.finding.instance_uid, instanceCount: row.instance_count }] : [];
  });
  const slices = await loadSlicePlaces(deps.db, reasons);
  return rows.map((row) => {
    const result = latest(row);
    if (!result) return toScan(row, undefined, undefined);
    return toScan(row, result.own, result.analysis, slices.get(row.id));
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
export async function requestScanStatus(deps: ScanDeps & { replica: Replica }, scanId: string, requested: string, userId: string | null): Promise<{ scan: Scan; from: string }> {
  return await inTransaction(deps.db, async (tx) => {
    const row = await getScanRow({ ...deps, db: tx }, scanId);
    const move = await clientRequested(tx, { ref: row.id, status: row.status }, requested, deps.clock.now().toISOString());
    // Archiving is a decision every workstation follows; the other states are derived where the
    // facts are (docs/sync.md, Scan status).
    if (move.to === 'archived') {
      const hlc = formatHlc(deps.replica.hlc.tick());
      await stampArchived(tx, row.id, hlc);
      await recordChanges(tx, deps.replica, [{ entity: 'scan', key: scanId, op: 'put', userId, hlc, payload: { archived: true } }]);
    }
    return { scan: await getScan({ ...deps, db: tx }, scanId), from: row.status };
  });
}

/**
 * once: the caller reads each result once (an export walking the whole store), so its findings'
 * places are not remembered: they would only push out those of the pages readers keep asking for.
 */
export async function listResults(deps: ScanDeps, filter: ResultFilter, page: PageRequest, options: { once?: boolean } = {}): Promise<Page<ScanResultV11>> {
  const rows = await listResultRows(deps.db, filter, page);
  const findings = await findResultFindings(deps.db, rows.items.map((row) => row.analysis_ref));
  // One query for the places of every finding on the page; a series without findings has none to give.
  const wanted = rows.items.flatMap((row) =>
    (findings.get(row.analysis_ref) ?? []).map((f) => ({ scanRef: row.id, instanceUid: f.instance_uid, instanceCount: options.once ? undefined : row.instance_count })),
  );
  const slices = await loadSlicePlaces(deps.db, wanted);
  const items = rows.items.map((row) => toScanResult(row, row.analysis, findings.get(row.analysis_ref) ?? [], filter, slices.get(row.id) ?? NO_SLICES));
  return { items, nextAfterId: rows.nextAfterId };
}

export async function getLatestResult(deps: ScanDeps, scanId: string): Promise<ScanResultV11> {
  const row = await getScanRow(deps, scanId);
  const { analyses, findings } = await loadLatestAnalyses(deps.db, [row]);
  const analysis = row.latest_analysis_ref === null ? undefined : analyses.get(row.latest_analysis_ref);
  if (!analysis) {
    throw new MiaError('not_found', 'This scan has no analysis result yet', `scan status is ${row.status}; request analysis by setting status queued`);
  }
  const own = findings.get(analysis.id) ?? [];
  const slices = await loadSlicePlaces(deps.db, own.map((f) => ({ scanRef: row.id, instanceUid: f.instance_uid, instanceCount: row.instance_count })));
  return toScanResult(row, analysis, own, {}, slices.get(row.id) ?? NO_SLICES);
}
