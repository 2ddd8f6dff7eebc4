import { XMLValidator } from 'fast-xml-parser';
import { describe, expect, it } from 'vitest';
import type { ScanResultV11 } from '#server/api/schemas.ts';
import { csvField, toCsv } from '#server/formats/csv.ts';
import { csvDocument, xmlAroundCollection, xmlCollection, xmlDocument } from '#server/formats/documents.ts';
import { successEnvelope, successEnvelopeAround } from '#server/http/envelope.ts';
import { scanResultSerializer } from '#server/formats/serializers.ts';
import { escapeXml, toXmlDocument } from '#server/formats/xml.ts';
import { parseCsv } from '../helpers/csv.ts';

describe('CSV (RFC 4180 with a formula guard)', () => {
  it('quotes commas, quotes and line breaks; doubles quotes', () => {
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField('two\r\nlines')).toBe('"two\r\nlines"');
    expect(csvField('Müller^Zoë')).toBe('Müller^Zoë');
  });

  it('neutralises formulas but keeps their text, and leaves numbers alone', () => {
    for (const formula of ['=1+1', '+SUM(A1)', '-2+3', '@cmd', '\tx', '\rx']) expect(csvField(formula)).toBe(csvField(`'${formula}`));
    expect(csvField(-2.5)).toBe('-2.5');
    expect(csvField(null)).toBe('');
  });

  it('neutralises formulas behind whitespace or line breaks, full-width triggers and DDE pipes', () => {
    const hidden = [
      '\n=1+1', '\r\n=1+1', ' =1+1', '  \t+SUM(A1)', '\u3000=1', '\u00a0@cmd', '\0=1', '\nplain',
      '＝1+1', '＋1', '－1', '＠SUM(A1)', '｜x', '﹦1', ' ＝HYPERLINK("http://evil.example")',
      "|cmd '/c calc'!A1", " |cmd '/c calc'!A1",
    ];
    for (const formula of hidden) expect(csvField(formula), JSON.stringify(formula)).toBe(csvField(`'${formula}`));
    for (const plain of ['Müller^Zoë', 'a=b', 'x|y', 'left - right', ' leading space', 'tumor_detected', '1.2.840.10008']) {
      expect(csvField(plain), plain).toBe(plain.includes(',') ? `"${plain}"` : plain);
    }
  });

  it('writes a header and CRLF records in the given column order', () => {
    expect(toCsv(['b', 'a'], [{ a: 1, b: 'x' }, { a: 2 }])).toBe('b,a\r\nx,1\r\n,2\r\n');
  });
});

describe('scan results as CSV', () => {
  const analysis = {
    id: 'ana_1',
    model: { id: 'm', name: 'Model, "quoted"', version: '=2.0', sha256: 'ab' },
    operating_point: 'triage',
    started_at: '2026-01-01T00:00:00.000Z',
    finished_at: '2026-01-01T00:00:01.000Z',
  };
  const place = { slice: 4, slices: 20, position_mm: -12.5, width_mm: 23.4, height_mm: 9, spacing_source: 'pixel_spacing' as const };
  const box = { x: 10, y: 20.5, width: 30, height: 40 };
  const result: ScanResultV11 = {
    patient_id: '+PAT,1',
    scan_id: '1.2.3',
    modality: 'CT',
    recommendation: 'Line one\r\nline "two"',
    findings: [
      { id: 'f1', label: 'hemorrhage', confidence: 0.91, location: box, instance_uid: '1.2.3.4', frame: 0, review: 'accepted', place, source: 'model', threshold: 0.5, operating_point: 'triage' },
      { id: 'f2', label: 'hemorrhage', confidence: 0.6, location: box, instance_uid: '1.2.3.5', frame: 2, review: 'rejected', review_reason: '@motion, "artefact"', place: null, source: 'reader', threshold: null, operating_point: null },
      { id: 'f3', label: 'tumor', confidence: 0.7, location: box, instance_uid: '1.2.3.6', frame: 1, review: null, localization: 'region', mask: { encoding: 'rle', x: 0, y: 0, width: 2, height: 2, counts: [1, 3] } },
      { id: 'f4', label: 'edema', confidence: 0.55, location: box, instance_uid: '1.2.3.7', frame: 0, review: null, localization: 'image' },
    ],
    lesions: [
      { id: 'f1', label: 'hemorrhage', finding_ids: ['f1', 'f2'], first_slice: 4, last_slice: 4, slices: 20, largest_diameter_mm: 23.4, confidence: 0.91, review: 'accepted' },
      { id: 'f3', label: 'tumor', finding_ids: ['f3'], first_slice: null, last_slice: null, slices: null, largest_diameter_mm: null, confidence: 0.7, review: null },
    ],
    analysis,
  };
  const byColumn = (text: string) => {
    const [header, ...rows] = parseCsv(text);
    for (const row of rows) expect(row).toHaveLength(scanResultSerializer.columns.length);
    return rows.map((row) => Object.fromEntries(header!.map((name, i) => [name, row[i]])));
  };

  it('writes one line per finding with every column in its place, escaped and guarded', () => {
    const [f1, f2, f3, f4] = byColumn(csvDocument(scanResultSerializer, [result]));
    const shared = {
      patient_id: "'+PAT,1", scan_id: '1.2.3', modality: 'CT', recommendation: 'Line one\r\nline "two"',
      analysis_id: 'ana_1', model_id: 'm', model_name: 'Model, "quoted"', model_version: "'=2.0", analysis_finished_at: '2026-01-01T00:00:01.000Z',
    };
    expect(f1).toEqual({
      ...shared, finding_index: '0', label: 'hemorrhage', confidence: '0.91', x: '10', y: '20.5', width: '30', height: '40', instance_uid: '1.2.3.4', frame: '0',
      review: 'accepted', finding_id: 'f1', slice: '4', slices: '20', position_mm: '-12.5', width_mm: '23.4', height_mm: '9', lesion_id: 'f1', source: 'model',
      review_reason: '', localization: 'box', mask_area_px: '', threshold: '0.5', operating_point: 'triage',
    });
    expect(f2).toMatchObject({ finding_index: '1', frame: '2', review: 'rejected', review_reason: "'@motion, \"artefact\"", slice: '', width_mm: '', lesion_id: 'f1', source: 'reader', threshold: '', operating_point: '' });
    expect(f3).toMatchObject({ finding_index: '2', review: '', lesion_id: 'f3', source: 'model', localization: 'region', mask_area_px: '3' });
    expect(f4).toMatchObject({ finding_index: '3', lesion_id: '', localization: 'image', mask_area_px: '' });
  });

  it('writes a result without findings as one line with empty finding cells', () => {
    const [line, ...rest] = byColumn(csvDocument(scanResultSerializer, [{ ...result, findings: [], lesions: [] }]));
    expect(rest).toEqual([]);
    const filled = Object.entries(line!).filter(([, value]) => value !== '').map(([name]) => name);
    expect(filled).toEqual(['patient_id', 'scan_id', 'modality', 'recommendation', 'analysis_id', 'model_id', 'model_name', 'model_version', 'analysis_finished_at', 'operating_point']);
  });
});

describe('XML', () => {
  it('escapes markup and drops characters XML 1.0 forbids', () => {
    expect(escapeXml(`<a href="x">&'`)).toBe('&lt;a href=&quot;x&quot;&gt;&amp;&apos;');
    expect(escapeXml('bell\u0007 and nul\u0000')).toBe('bell and nul');
  });

  it('keeps carriage returns through a parser and drops unpaired surrogates', async () => {
    const { XMLParser } = await import('fast-xml-parser');
    const doc = toXmlDocument('root', { v: 'line 1\r\nline 2 & more' }, {});
    expect(new XMLParser({ htmlEntities: true }).parse(doc).root.v).toBe('line 1\r\nline 2 & more');
    expect(escapeXml('ok \uD83D\uDE00 lone \uD83D end \uDE00.')).toBe('ok \uD83D\uDE00 lone  end .');
  });

  it('produces well-formed documents from any strings', () => {
    const nasty = ['</x>', ']]>', '\u0001\u0002', '"\'&<>', 'Ünïcödé 漢字'];
    const doc = toXmlDocument('root', { items: nasty.map((v) => ({ v })), empty: null, n: 3, yes: true }, { items: 'item' });
    expect(XMLValidator.validate(doc)).toBe(true);
    expect(doc).toContain('<item><v>&lt;/x&gt;</v></item>');
  });

  it('refuses element names that are not XML names', () => {
    expect(() => toXmlDocument('root', { 'bad name': 1 }, {})).toThrow(/not an XML element name/);
  });

  it('writes a document around a kept collection exactly as it writes it whole', () => {
    const items = [{ a: 'x & y', n: [1, 2] }, { a: null, n: [] }];
    const serializer = { ...scanResultSerializer, collection: 'things', item: 'thing', xmlItemNames: { n: 'v' } } as unknown as typeof scanResultSerializer;
    const head = { status: 'success', timestamp: '2026-03-01T08:00:00.000Z', meta: { request_id: 'r1', version: '1.1' } };
    const whole = xmlDocument('response', head, serializer, items as never[], { next_cursor: null });
    const [before, after] = xmlAroundCollection('response', head, serializer, { next_cursor: null });
    expect(before + xmlCollection(serializer, items as never[]) + after).toBe(whole);
    expect(whole).toBe(toXmlDocument('response', { ...head, things: items, next_cursor: null }, { things: 'thing', n: 'v' }));
  });
});

describe('JSON envelope around kept data', () => {
  it('is the bytes JSON.stringify writes for the whole envelope', () => {
    const data = { items: [{ id: 'a"b', n: 1.5, none: null }], next_cursor: null };
    const meta = { request_id: 'req-\u2028', version: 'v1.1' as const };
    const at = '2026-03-01T08:00:00.000Z';
    const [before, after] = successEnvelopeAround(meta, at);
    expect(before + JSON.stringify(data) + after).toBe(JSON.stringify(successEnvelope(data, meta, at)));
  });
});
