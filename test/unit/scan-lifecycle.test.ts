/** The scan lifecycle on a real SQLite file: each event moves a scan exactly as PRODUCT.md's Scan states say, or leaves it. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ScanStatus } from '#common/vocabulary.ts';
import { MiaError } from '#server/errors.ts';
import * as lifecycle from '#server/scans/lifecycle.ts';
import type { Database } from '#server/store/database.ts';
import { openDatabase } from '#server/store/sqlite.ts';
import { setFindingReview } from '#server/store/analyses.ts';
import { findScan } from '#server/store/scans.ts';
import { seedAnalysis, seedScan } from '../helpers/seed.ts';

const AT = '2026-03-02T09:00:00.000Z';
let dir: string;
let db: Database;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'mia-lifecycle-'));
  db = openDatabase(dir);
});
afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A scan put straight into `status` (as the store would hold it), for the event under test. */
async function scanIn(status: ScanStatus, analysed = false): Promise<{ ref: number; scanId: string }> {
  const seeded = await seedScan(db);
  if (analysed) await seedAnalysis(db, seeded, [{}, {}]);
  (await db.run('UPDATE scans SET status = ? WHERE id = ?', [status, seeded.scanRef]));
  return { ref: seeded.scanRef, scanId: seeded.scanId };
}

const stored = async (scanId: string) => {
  const row = await findScan(db, scanId);
  if (!row) throw new Error('scan vanished');
  return { status: row.status, reason: row.status_reason, updatedAt: row.updated_at };
};

const errorKind = async (fn: () => Promise<unknown>): Promise<string | undefined> => {
  try {
    await fn();
  } catch (err) {
    return err instanceof MiaError ? err.kind : 'other';
  }
  return undefined;
};

describe('scan lifecycle', () => {
  it('walks an analysis from received to analyzed, stamping the time', async () => {
    const scan = await scanIn('received');
    expect(await lifecycle.analysisQueued(db, { ref: scan.ref, status: 'received' }, AT)).toEqual({ from: 'received', to: 'queued', moved: true });
    expect(await lifecycle.analysisStarted(db, { ref: scan.ref, status: 'queued' }, AT)).toBe(true);
    expect((await stored(scan.scanId)).status).toBe('analyzing');
    expect((await lifecycle.analysisSucceeded(db, { ref: scan.ref, status: 'analyzing' }, AT)).to).toBe('analyzed');
    expect(await stored(scan.scanId)).toEqual({ status: 'analyzed', reason: null, updatedAt: AT });
  });

  it('refuses to queue a reported or archived scan (409) and writes nothing', async () => {
    for (const status of ['reported', 'archived'] as const) {
      const scan = await scanIn(status);
      expect(await errorKind(() => lifecycle.analysisQueued(db, { ref: scan.ref, status }, AT))).toBe('conflict');
      expect((await stored(scan.scanId)).status).toBe(status);
    }
  });

  it('does not start an analysis of a scan archived meanwhile', async () => {
    const scan = await scanIn('archived');
    expect(await lifecycle.analysisStarted(db, { ref: scan.ref, status: 'archived' }, AT)).toBe(false);
    expect((await stored(scan.scanId)).status).toBe('archived');
  });

  it('fails with the reason, but never takes a scan that moved on (archived) back to failed', async () => {
    const running = await scanIn('analyzing');
    await lifecycle.analysisFailed(db, { ref: running.ref, status: 'analyzing' }, 'x'.repeat(900), AT);
    expect((await stored(running.scanId)).status).toBe('failed');
    expect((await stored(running.scanId)).reason).toHaveLength(500);
    const archived = await scanIn('archived');
    expect((await lifecycle.analysisFailed(db, { ref: archived.ref, status: 'archived' }, 'too late', AT)).moved).toBe(false);
    expect((await stored(archived.scanId)).status).toBe('archived');
  });

  it('requeues an interrupted analysis only from analyzing', async () => {
    const running = await scanIn('analyzing');
    await lifecycle.analysisInterrupted(db, { ref: running.ref, status: 'analyzing' }, 'resumes when mia next runs', AT);
    expect(await stored(running.scanId)).toMatchObject({ status: 'queued', reason: 'resumes when mia next runs' });
    const reviewed = await scanIn('reviewed');
    expect((await lifecycle.analysisInterrupted(db, { ref: reviewed.ref, status: 'reviewed' }, 'no', AT)).moved).toBe(false);
  });

  it('a withdrawn analysis returns the scan to received, or to analyzed when an earlier result stands', async () => {
    const fresh = await scanIn('queued');
    await lifecycle.analysisWithdrawn(db, { ref: fresh.ref, status: 'queued', hasResult: false }, 'analysis cancelled', AT);
    expect(await stored(fresh.scanId)).toMatchObject({ status: 'received', reason: 'analysis cancelled' });
    const again = await scanIn('analyzing', true);
    await lifecycle.analysisWithdrawn(db, { ref: again.ref, status: 'analyzing', hasResult: true }, 'not analysed by the model: too few slices', AT);
    expect((await stored(again.scanId)).status).toBe('analyzed');
  });

  it('a client-requested queue with no job to run fails the scan instead of leaving it queued', async () => {
    const scan = await scanIn('queued');
    await lifecycle.queueRequestUnmet(db, { ref: scan.ref, status: 'queued' }, 'no installed model applies to MG', AT);
    expect(await stored(scan.scanId)).toMatchObject({ status: 'failed', reason: 'no installed model applies to MG' });
  });

  it('review moves with the verdicts: started, completed, reopened when one is cleared', async () => {
    const scan = await scanIn('analyzed', true);
    const findings = (await db.all('SELECT f.id FROM findings f JOIN analyses a ON a.id = f.analysis_ref WHERE a.scan_ref = ? ORDER BY f.id', [scan.ref])) as { id: number }[];
    const verdict = async (i: number, review: 'accepted' | null) => await setFindingReview(db, findings[i]!.id, review, null, AT);
    await verdict(0, 'accepted');
    expect(await lifecycle.reviewChanged(db, { ref: scan.ref, status: 'analyzed' }, AT)).toEqual({ from: 'analyzed', to: 'in_review', moved: true });
    await verdict(1, 'accepted');
    expect((await lifecycle.reviewChanged(db, { ref: scan.ref, status: 'in_review' }, AT)).to).toBe('reviewed');
    expect((await stored(scan.scanId)).reason).toBe('every AI finding accepted or rejected');
    await verdict(1, null);
    expect((await lifecycle.reviewChanged(db, { ref: scan.ref, status: 'reviewed' }, AT)).to).toBe('in_review');
  });

  it('a signed report reports the scan from any reading state, and not from received', async () => {
    const scan = await scanIn('in_review');
    await lifecycle.reportFinalized(db, { ref: scan.ref, status: 'in_review' }, 'rpt_1', AT);
    expect(await stored(scan.scanId)).toMatchObject({ status: 'reported', reason: 'report rpt_1 finalized' });
    const unread = await scanIn('received');
    expect((await lifecycle.reportFinalized(db, { ref: unread.ref, status: 'received' }, 'rpt_2', AT)).moved).toBe(false);
  });

  it("a client's request: 400 for a system status, 409 for a move the state machine forbids, else moved", async () => {
    const scan = await scanIn('analyzed');
    expect(await errorKind(() => lifecycle.clientRequested(db, { ref: scan.ref, status: 'analyzed' }, 'analyzing', AT))).toBe('invalid');
    expect(await errorKind(() => lifecycle.clientRequested(db, { ref: scan.ref, status: 'analyzed' }, 'reported', AT))).toBe('conflict');
    expect((await stored(scan.scanId)).status).toBe('analyzed');
    expect((await lifecycle.clientRequested(db, { ref: scan.ref, status: 'analyzed' }, 'in_review', AT)).to).toBe('in_review');
    expect((await stored(scan.scanId)).status).toBe('in_review');
  });
});
