/**
 * Exports larger than one page of reading (issue 15: they are written page by page, never held
 * whole): every matching scan is in the file exactly once, in each format, and the file is
 * well-formed where the pages join.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedAnalysedScans } from '../../bench/seed-results.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/** Many pages of the export's reading (25 to 100 scans each); scan i has i % 3 findings. */
const SCANS = 2_345;
const FINDINGS = Array.from({ length: SCANS }, (_, i) => i % 3).reduce((sum, n) => sum + n, 0);
/** A scan without findings still has its one CSV line. */
const CSV_LINES = Array.from({ length: SCANS }, (_, i) => Math.max(1, i % 3)).reduce((sum, n) => sum + n, 0);

let t: TestServer;
let key: string;
beforeAll(async () => {
  t = await startTestServer();
  key = await seedAnalysedScans(t.server.services.db, SCANS);
});
afterAll(async () => {
  await t.close();
});

async function exportFile(format: 'csv' | 'json' | 'xml', filters: Record<string, unknown> = {}): Promise<{ record: any; text: string }> {
  const created = await t.request('POST', '/v1/exports', { key, body: { format, filters } });
  expect(created.status).toBe(201);
  const file = await t.request('GET', created.json.data.download_url, { key });
  expect(file.status).toBe(200);
  expect(Buffer.byteLength(file.text)).toBe(created.json.data.size_bytes);
  return { record: created.json.data, text: file.text };
}

describe('streamed exports', () => {
  it('CSV: one header, one line per finding (or per scan without any), every scan once', async () => {
    const { record, text } = await exportFile('csv');
    expect(record.row_count).toBe(SCANS);
    const lines = text.split('\r\n');
    expect(lines.pop()).toBe('');
    expect(lines[0]?.startsWith('patient_id,scan_id,modality,')).toBe(true);
    expect(lines.filter((line) => line.startsWith('patient_id,'))).toHaveLength(1);
    const body = lines.slice(1);
    expect(body).toHaveLength(CSV_LINES);
    const columns = lines[0]!.split(',').length;
    expect(body.every((line) => line.split(',').length === columns)).toBe(true);
    const scanIds = new Set(body.map((line) => line.split(',')[1]));
    expect(scanIds.size).toBe(SCANS);
    expect(body.filter((line) => line.includes('tumor_detected'))).toHaveLength(FINDINGS);
  });

  it('JSON: one document with every scan result and its row count', async () => {
    const { record, text } = await exportFile('json');
    const document = JSON.parse(text) as { export_id: string; deidentified: boolean; row_count: number; scan_results: { scan_id: string; findings: unknown[] }[] };
    expect(document.export_id).toBe(record.id);
    expect(document.deidentified).toBe(false);
    expect(document.row_count).toBe(SCANS);
    expect(new Set(document.scan_results.map((r) => r.scan_id)).size).toBe(SCANS);
    expect(document.scan_results.reduce((sum, r) => sum + r.findings.length, 0)).toBe(FINDINGS);
  });

  it('XML: well-formed, every scan result once, the row count after them', async () => {
    const { text } = await exportFile('xml');
    expect(XMLValidator.validate(text)).toBe(true);
    const document = new XMLParser({ isArray: (name) => name === 'scan_result' || name === 'finding' }).parse(text) as {
      export: { row_count: number; scan_results: { scan_result: { scan_id: string; findings: { finding?: unknown[] } | '' }[] } };
    };
    const results = document.export.scan_results.scan_result;
    expect(document.export.row_count).toBe(SCANS);
    expect(new Set(results.map((r) => r.scan_id)).size).toBe(SCANS);
    expect(results.reduce((sum, r) => sum + (typeof r.findings === 'object' ? (r.findings.finding?.length ?? 0) : 0), 0)).toBe(FINDINGS);
  });

  it('an export that matches nothing is an empty but well-formed document in each format', async () => {
    const csv = await exportFile('csv', { patient_id: 'NOBODY' });
    expect(csv.record.row_count).toBe(0);
    expect(csv.text.split('\r\n')).toHaveLength(2);
    const json = JSON.parse((await exportFile('json', { patient_id: 'NOBODY' })).text);
    expect(json).toMatchObject({ row_count: 0, scan_results: [] });
    const xml = (await exportFile('xml', { patient_id: 'NOBODY' })).text;
    expect(XMLValidator.validate(xml)).toBe(true);
    expect(xml).toContain('<scan_results></scan_results><row_count>0</row_count></export>');
  });
});
