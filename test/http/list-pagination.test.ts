/**
 * Walking a list endpoint's pages with next_cursor (keyset pages, server/store/page.ts) yields
 * every matching record exactly once, whatever the page size, with and without filters; a
 * record added while a client walks appears once, on a later page, and nothing repeats
 * (issue 15: the worklist reads 100,000 series this way).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedAnalysedScans } from '../../bench/seed-results.ts';
import { seedScan } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/** Scan i: patient BENCH-(i % 300), CT when i is odd, i % 3 findings; one study per scan. */
const SCANS = 1_234;

let t: TestServer;
let key: string;
beforeAll(async () => {
  t = await startTestServer();
  key = await seedAnalysedScans(t.server.services.db, SCANS);
});
afterAll(async () => {
  await t.close();
});

async function walk(path: string, limit: number, between?: () => Promise<void>): Promise<{ items: any[]; pages: number }> {
  const items: any[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const separator = path.includes('?') ? '&' : '?';
    const reply = await t.request('GET', `${path}${separator}limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`, { key });
    expect(reply.status).toBe(200);
    items.push(...reply.json.data.items);
    cursor = reply.json.data.next_cursor;
    pages += 1;
    if (pages === 2) await between?.();
  } while (cursor);
  return { items, pages };
}

describe('list pagination', () => {
  it('/v1/scans: every scan once at page sizes from 7 to 500, in one order', async () => {
    const whole = await walk('/v1/scans', 500);
    expect(whole.items).toHaveLength(SCANS);
    expect(new Set(whole.items.map((s) => s.scan_id)).size).toBe(SCANS);
    for (const limit of [7, 100, 499]) {
      const paged = await walk('/v1/scans', limit);
      expect(paged.pages).toBe(Math.ceil(SCANS / limit));
      expect(paged.items.map((s) => s.scan_id)).toEqual(whole.items.map((s) => s.scan_id));
    }
  });

  it('/v1/scans with a filter: exactly the matching scans, once each', async () => {
    const ct = await walk('/v1/scans?modality=CT', 50);
    expect(ct.items).toHaveLength(Math.floor(SCANS / 2));
    expect(ct.items.every((s) => s.modality === 'CT')).toBe(true);
    expect(new Set(ct.items.map((s) => s.scan_id)).size).toBe(ct.items.length);
    const patient = await walk('/v1/scans?patient_id=BENCH-7', 2);
    expect(patient.items.map((s) => s.scan_id).sort()).toEqual(
      Array.from({ length: SCANS }, (_, i) => i)
        .filter((i) => i % 300 === 7)
        .map((i) => `1.2.826.0.1.9.${i}.1`)
        .sort(),
    );
  });

  it('/v1/studies and /v1/scan/results: every record once; a label filter keeps exactly the scans with it', async () => {
    const studies = await walk('/v1/studies', 111);
    expect(new Set(studies.items.map((s) => s.study_uid)).size).toBe(SCANS);
    const results = await walk('/v1/scan/results', 97);
    expect(new Set(results.items.map((r) => r.scan_id)).size).toBe(SCANS);
    const withFinding = await walk('/v1/scan/results?label=tumor_detected', 33);
    expect(withFinding.items).toHaveLength(Array.from({ length: SCANS }, (_, i) => i % 3).filter((n) => n > 0).length);
    expect(new Set(withFinding.items.map((r) => r.scan_id)).size).toBe(withFinding.items.length);
  });

  it('a scan stored while a client walks the pages appears once, and nothing repeats', async () => {
    let added = '';
    const walked = await walk('/v1/scans', 100, async () => {
      added = (await seedScan(t.server.services.db, { patientId: 'LATE-1' })).scanId;
    });
    const ids = walked.items.map((s) => s.scan_id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.filter((id) => id === added)).toHaveLength(1);
    expect(ids).toHaveLength(SCANS + 1);
  });
});
