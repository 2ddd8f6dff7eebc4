/**
 * One report per downloaded file, cut from the server's own CSV and XML of the report list (made
 * here by the server's serializers, so a change there shows up), and the impression suggested
 * from accepted findings.
 */
import { describe, expect, it } from 'vitest';
import type { Report } from '#server/api/schemas.ts';
import { csvDocument, xmlDocument } from '#server/formats/documents.ts';
import { reportSerializer } from '#server/formats/serializers.ts';
import { parseCsv } from '../helpers/csv.ts';
import type { Finding } from '../../renderer/src/api/types.ts';
import { csvRecords, onlyReportCsv, onlyReportXml } from '../../renderer/src/report-download.ts';
import { impressionFromFindings } from '../../renderer/src/report-text.ts';

const finding = (id: string, label: string, confidence: number, review: Finding['review']): Finding => ({
  id,
  label,
  confidence,
  location: { x: 1, y: 2, width: 3, height: 4 },
  instance_uid: `1.2.3.${id}`,
  frame: 0,
  review,
});

function report(id: string, impression: string, findings: Finding[] = []): Report {
  return {
    id,
    scan_id: '1.2.840.1',
    patient_id: 'PAT-1',
    modality: 'MR',
    status: 'draft',
    impression,
    recommendation: 'Follow-up',
    recommendation_basis: 'model',
    findings,
    analysis: { id: 'ana_1', model_name: 'mia phantom detector', model_version: '1.0.0' },
    author: { id: 'usr_1', email: 'r@hospital.test' },
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    finalized_at: null,
    finalized_by: null,
    addenda: [],
    lesions: [],
    measurements: [],
    conflicts: [],
  };
}

// Impressions a naive line split or a naive <report> search would cut wrongly.
const awkward = [
  report('rpt_1', 'Line one,\r\nline "two"\nand <report><id>rpt_2</id> in text', [finding('f1', 'tumor_detected', 0.9, 'accepted')]),
  report('rpt_2', '=HYPERLINK("x") formula-looking text'),
  report('rpt_3', ''),
];

describe('one report from the list documents', () => {
  it('CSV: the header and that report\'s record, byte for byte as the server wrote them', () => {
    const csv = csvDocument(reportSerializer, awkward);
    expect(csvRecords(csv).join('')).toBe(csv);
    for (const wanted of awkward) {
      const one = onlyReportCsv(csv, wanted.id)!;
      const [header, row, ...rest] = parseCsv(one);
      expect(rest).toEqual([]);
      expect(header).toEqual([...reportSerializer.columns]);
      expect(row![0]).toBe(wanted.id);
      // The formula guard and quoting are the server's, untouched.
      expect(csv).toContain(one.slice(one.indexOf('\r\n') + 2));
    }
    expect(parseCsv(onlyReportCsv(csv, 'rpt_2')!)[1]![5]).toBe(`'=HYPERLINK("x") formula-looking text`);
    expect(onlyReportCsv(csv, 'rpt_9')).toBeNull();
  });

  it('XML: the envelope with only that report element', () => {
    const xml = xmlDocument('response', { status: 'success' }, reportSerializer, awkward, { next_cursor: null });
    for (const wanted of awkward) {
      const one = onlyReportXml(xml, wanted.id)!;
      expect(one.startsWith('<?xml version="1.0" encoding="UTF-8"?>\n<response><status>success</status><reports><report><id>')).toBe(true);
      expect(one.match(/<report>/g)).toHaveLength(1);
      expect(one).toContain(`<report><id>${wanted.id}</id>`);
      expect(one.endsWith('</report></reports><next_cursor/></response>\n')).toBe(true);
    }
    // The escaped look-alike inside rpt_1's impression is text, not an element.
    expect(onlyReportXml(xml, 'rpt_1')).toContain('&lt;report&gt;&lt;id&gt;rpt_2&lt;/id&gt;');
    expect(onlyReportXml(xml, 'rpt_9')).toBeNull();
  });
});

describe('suggested impression', () => {
  const sources = {
    displayName: (label: string) => ({ tumor_detected: 'Tumour', hemorrhage_detected: 'Haemorrhage' })[label] ?? label,
    place: (f: Finding) => (f.id === 'f1' ? { slice: 7, slices: 16 } : null),
    model: 'mia phantom detector v1.0.0',
  };

  it('lists accepted findings by display name, confidence and slice; rejected and open ones are left out', () => {
    const text = impressionFromFindings(
      [finding('f1', 'tumor_detected', 0.874, 'accepted'), finding('f2', 'hemorrhage_detected', 0.6, 'rejected'), finding('f3', 'hemorrhage_detected', 0.55, null), finding('f4', 'hemorrhage_detected', 0.51, 'accepted')],
      sources,
    );
    expect(text).toBe(
      'AI findings accepted on review (mia phantom detector v1.0.0, not for clinical use):\n' +
        '- Tumour: AI confidence 87%, slice 7 of 16.\n' +
        '- Haemorrhage: AI confidence 51%.',
    );
  });

  it('suggests nothing when no finding was accepted', () => {
    expect(impressionFromFindings([finding('f2', 'hemorrhage_detected', 0.6, 'rejected')], sources)).toBeNull();
    expect(impressionFromFindings([], sources)).toBeNull();
  });
});
