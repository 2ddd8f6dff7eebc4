import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scanResultSerializer } from '#server/formats/serializers.ts';
import { parseCsv } from '../helpers/csv.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis, seedScan, type SeededScan } from '../helpers/seed.ts';

let t: TestServer;
let tumour: SeededScan;
let clean: SeededScan;
let awkward: SeededScan;
let unanalysed: SeededScan;

beforeAll(async () => {
  t = await startTestServer();
  const db = t.server.services.db;
  tumour = await seedScan(db, { patientId: 'P-001', modality: 'MR' });
  await seedAnalysis(db, tumour, [
    { label: 'tumor_detected', confidence: 0.93, x: 100, y: 80, width: 24, height: 20, frame: 0 },
    { label: 'hemorrhage_detected', confidence: 0.41 },
  ]);
  clean = await seedScan(db, { patientId: 'P-002', modality: 'CT' });
  await seedAnalysis(db, clean, [], { recommendation: 'No findings; routine follow-up.' });
  awkward = await seedScan(db, { patientId: '=HYPERLINK("http://x")', modality: 'MR' });
  await seedAnalysis(db, awkward, [{ confidence: 0.7 }], { recommendation: 'Compare with prior, "urgent", check\nline two & <b>' });
  unanalysed = await seedScan(db, { patientId: 'P-004' });
});
afterAll(async () => {
  await t.close();
});

describe('GET /v1/scan/results', () => {
  it('returns one item per analysed scan in the exact shape of spec 2.3-2.5', async () => {
    const reply = await t.request('GET', '/v1/scan/results');
    expect(reply.status).toBe(200);
    const items = reply.json.data.items as { scan_id: string }[];
    expect(items.map((i) => i.scan_id)).toEqual([tumour.scanId, clean.scanId, awkward.scanId]);
    const first = reply.json.data.items[0];
    expect(Object.keys(first)).toEqual(['patient_id', 'scan_id', 'modality', 'findings', 'recommendation']);
    expect(first).toMatchObject({ patient_id: 'P-001', modality: 'MR', recommendation: 'Follow-up MRI in 3 months.' });
    expect(first.findings[0]).toEqual({
      label: 'tumor_detected',
      confidence: 0.93,
      location: { x: 100, y: 80, width: 24, height: 20 },
      instance_uid: expect.stringMatching(/^[0-9.]+$/),
      frame: 0,
    });
    expect(reply.json.data.items[1].findings).toEqual([]);
    expect(reply.json.data.next_cursor).toBeNull();
  });

  it('adds the analysis record and finding ids under API-Version 1.1', async () => {
    const reply = await t.request('GET', `/v1/scan/results?scan_id=${tumour.scanId}`, { headers: { 'API-Version': '1.1' } });
    const item = reply.json.data.items[0];
    expect(item.analysis.model).toMatchObject({ id: 'mia-phantom-detector', version: '1.0.0' });
    expect(item.findings[0]).toMatchObject({ id: expect.stringMatching(/^fnd_/), review: null });
  });

  it('filters by label and min_confidence, showing only matching findings', async () => {
    const reply = await t.request('GET', '/v1/scan/results?label=tumor_detected&min_confidence=0.9');
    expect(reply.json.data.items).toHaveLength(1);
    expect(reply.json.data.items[0].findings.map((f: { label: string }) => f.label)).toEqual(['tumor_detected']);
    const bad = await t.request('GET', '/v1/scan/results?min_confidence=1.5');
    expect(bad.status).toBe(400);
    expect(bad.json.error.details).toMatch(/^min_confidence:/);
  });

  it('GET /v1/scans/{id}/results gives the latest analysis, 404 before any', async () => {
    await seedAnalysis(t.server.services.db, clean, [{ label: 'infarct_detected', confidence: 0.66 }], { version: '1.1.0' });
    const latest = await t.request('GET', `/v1/scans/${clean.scanId}/results`, { headers: { 'API-Version': '1.1' } });
    expect(latest.json.data.analysis.model.version).toBe('1.1.0');
    expect(latest.json.data.findings.map((f: { label: string }) => f.label)).toEqual(['infarct_detected']);
    const none = await t.request('GET', `/v1/scans/${unanalysed.scanId}/results`);
    expect(none.status).toBe(404);
  });

  it('CSV: documented fixed columns, one row per finding, RFC 4180 quoting, formula guard', async () => {
    const reply = await t.request('GET', '/v1/scan/results?format=csv');
    expect(reply.status).toBe(200);
    expect(reply.headers.get('content-type')).toBe('text/csv; charset=utf-8');
    expect(reply.text.endsWith('\r\n')).toBe(true);
    const rows = parseCsv(reply.text);
    expect(rows[0]).toEqual([...scanResultSerializer.columns]);
    const col = (name: string) => rows[0]!.indexOf(name);
    // tumour scan: 2 findings -> 2 rows; clean scan: 1 finding; awkward: 1 finding.
    expect(rows).toHaveLength(1 + 2 + 1 + 1);
    expect(rows[1]![col('label')]).toBe('tumor_detected');
    expect(rows[1]![col('confidence')]).toBe('0.93');
    expect(rows[1]![col('x')]).toBe('100');
    const awkwardRow = rows[4]!;
    expect(awkwardRow[col('patient_id')]).toBe(`'=HYPERLINK("http://x")`);
    expect(awkwardRow[col('recommendation')]).toBe('Compare with prior, "urgent", check\nline two & <b>');
  });

  it('CSV keeps a row for an analysed scan without findings', async () => {
    const db = t.server.services.db;
    const empty = await seedScan(db, { patientId: 'P-EMPTY' });
    await seedAnalysis(db, empty, []);
    const rows = parseCsv((await t.request('GET', `/v1/scan/results?format=csv&scan_id=${empty.scanId}`)).text);
    expect(rows).toHaveLength(2);
    expect(rows[1]![rows[0]!.indexOf('label')]).toBe('');
    expect(rows[1]![rows[0]!.indexOf('patient_id')]).toBe('P-EMPTY');
  });

  it('XML: well-formed, escaped, same content as JSON', async () => {
    const reply = await t.request('GET', '/v1/scan/results', { headers: { Accept: 'application/xml' } });
    expect(reply.headers.get('content-type')).toBe('application/xml; charset=utf-8');
    expect(XMLValidator.validate(reply.text)).toBe(true);
    const doc = new XMLParser({ isArray: (name) => name === 'scan_result' || name === 'finding', parseTagValue: false }).parse(reply.text);
    expect(doc.response.status).toBe('success');
    const results = doc.response.scan_results.scan_result;
    const json = (await t.request('GET', '/v1/scan/results')).json.data.items;
    expect(results).toHaveLength(json.length);
    const awkwardXml = results.find((r: { scan_id: string }) => r.scan_id === awkward.scanId);
    expect(awkwardXml.recommendation).toBe('Compare with prior, "urgent", check\nline two & <b>');
    expect(results[0].findings.finding[0].location.x).toBe('100');
  });

  it('format parameter wins over Accept; Accept alone selects; */* is JSON', async () => {
    const csv = await t.request('GET', '/v1/scan/results?format=csv', { headers: { Accept: 'application/xml' } });
    expect(csv.headers.get('content-type')).toMatch(/^text\/csv/);
    const accept = await t.request('GET', '/v1/scan/results', { headers: { Accept: 'text/csv' } });
    expect(accept.headers.get('content-type')).toMatch(/^text\/csv/);
    const any = await t.request('GET', '/v1/scan/results', { headers: { Accept: '*/*' } });
    expect(any.json.status).toBe('success');
    const none = await t.request('GET', '/v1/scan/results', { headers: { Accept: 'image/png' } });
    expect(none.status).toBe(406);
  });
});

describe('pagination', () => {
  it('walks every scan exactly once with limit and cursor', async () => {
    const db = t.server.services.db;
    for (let i = 0; i < 23; i += 1) await seedScan(db, { patientId: `PAGE-${i}` });
    const total = (await t.request('GET', '/v1/scans?limit=500')).json.data.items.length;
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = cursor ? `&cursor=${cursor}` : '';
      const reply = await t.request('GET', `/v1/scans?limit=5${query}`);
      expect(reply.json.data.items.length).toBeLessThanOrEqual(5);
      seen.push(...reply.json.data.items.map((s: { scan_id: string }) => s.scan_id));
      cursor = reply.json.data.next_cursor;
      pages += 1;
    } while (cursor);
    expect(seen).toHaveLength(total);
    expect(new Set(seen).size).toBe(total);
    expect(pages).toBe(Math.ceil(total / 5));
  });

  it('rejects a forged cursor and limits outside 1..500', async () => {
    expect((await t.request('GET', '/v1/scans?cursor=bm9wZQ')).status).toBe(400);
    expect((await t.request('GET', '/v1/scans?limit=0')).status).toBe(400);
    expect((await t.request('GET', '/v1/scans?limit=501')).status).toBe(400);
  });

  it('filters the worklist by patient, modality (MRI as alias of MR) and status', async () => {
    const byPatient = await t.request('GET', '/v1/scans?patient_id=P-001');
    expect(byPatient.json.data.items.map((s: { scan_id: string }) => s.scan_id)).toEqual([tumour.scanId]);
    expect(byPatient.json.data.items[0].ai_summary).toMatchObject({ label: 'tumor_detected', confidence: 0.93 });
    const ct = await t.request('GET', '/v1/scans?modality=CT&limit=500');
    expect(ct.json.data.items.every((s: { modality: string }) => s.modality === 'CT')).toBe(true);
    const mri = await t.request('GET', '/v1/scans?modality=MRI&limit=500');
    expect(mri.json.data.items.length).toBeGreaterThan(0);
    const received = await t.request('GET', '/v1/scans?status=received&limit=500');
    expect(received.json.data.items.every((s: { status: string }) => s.status === 'received')).toBe(true);
  });
});
