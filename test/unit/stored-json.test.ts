/**
 * JSON mia wrote into its own store in earlier shapes, or damaged: an instance's pixel spacing
 * and an analysis' triage labels and thresholds are read for what they still say, and a value
 * that is not what it should be reads as absent, never as a wrong size or a crash of the page.
 */
import { describe, expect, it } from 'vitest';
import { decodeSpacing, encodeSpacing } from '#server/store/instances.ts';
import { triageFindings } from '#server/scans/triage.ts';
import type { SummaryFinding } from '#server/store/scan-summaries.ts';

describe('stored pixel spacing', () => {
  it('reads what the import writes, with its source', () => {
    expect(decodeSpacing(encodeSpacing([0.7, 0.8], 'imager_pixel_spacing'))).toEqual({ spacing: [0.7, 0.8], source: 'imager_pixel_spacing' });
  });

  it('reads the bare pair of files imported before the source was kept, with no source', () => {
    expect(decodeSpacing('[0.5,0.6]')).toEqual({ spacing: [0.5, 0.6], source: null });
  });

  it.each([
    ['a pair of three', '[0.5,0.6,0.7]'],
    ['a text in the pair', '["0.5",0.6]'],
    ['an unknown source', '{"spacing":[0.5,0.6],"source":"guessed"}'],
    ['no spacing', '{"source":"pixel_spacing"}'],
    ['not JSON', '0.5\\0.6'],
    ['null', 'null'],
  ])('reads %s as no spacing', (_, text) => {
    expect(decodeSpacing(text)).toEqual({ spacing: null, source: null });
  });
});

describe('stored triage labels and thresholds', () => {
  const finding = (id: number, label: string, confidence: number): SummaryFinding => ({
    id,
    analysis_ref: 1,
    public_id: `fnd_${id}`,
    label,
    confidence,
    review: null,
    source: 'model',
    instance_uid: '1.2.3',
    frame: 0,
  });
  const findings = [finding(1, 'mass', 0.9), finding(2, 'bleed', 0.6), finding(3, 'bleed', 0.3)];
  const labels = JSON.stringify({ bleed: { urgency: 'urgent', display_name: 'Haemorrhage' }, mass: { urgency: 'soon', display_name: 'Mass' } });

  it('orders by the stored urgency, names by the stored name, and cuts at the stored thresholds', () => {
    const top = triageFindings({ id: 1, public_id: 'ana_1', thresholds: '{"bleed":0.5,"mass":0.5}', triage_labels: labels }, findings);
    expect(top.map((t) => [t.finding.id, t.urgency, t.name])).toEqual([
      [2, 'urgent', 'Haemorrhage'],
      [1, 'soon', 'Mass'],
    ]);
  });

  it('treats labels with an unknown urgency as none stored: every finding routine, named by its label', () => {
    const damaged = JSON.stringify({ bleed: { urgency: 'stat', display_name: 'Haemorrhage' } });
    const top = triageFindings({ id: 2, public_id: 'ana_2', thresholds: '{"bleed":0.5,"mass":0.5}', triage_labels: damaged }, findings);
    expect(top.map((t) => [t.finding.id, t.urgency, t.name])).toEqual([
      [1, 'routine', 'mass'],
      [2, 'routine', 'bleed'],
    ]);
  });

  it('treats thresholds that are not numbers as none stored: every finding counts', () => {
    const top = triageFindings({ id: 3, public_id: 'ana_3', thresholds: '{"bleed":"0.5"}', triage_labels: labels }, findings);
    expect(top.map((t) => t.finding.id)).toEqual([2, 3, 1]);
  });
});
