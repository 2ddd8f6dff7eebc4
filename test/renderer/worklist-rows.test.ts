/**
 * The worklist's grouping, search and order without a browser (renderer/src/worklist-rows.ts):
 * studies hold the series that pass the filters, the search reads names with or without
 * accents, and the default order is urgent first, then newest.
 */
import { describe, expect, it } from 'vitest';
import type { Scan, Study, Triage } from '../../renderer/src/api/types.ts';
import { DEFAULT_SORT, worklistRows, type Filters } from '../../renderer/src/worklist-rows.ts';

const triage = (priority: Triage['priority']): Triage => ({ priority, reason: priority === 'routine' ? null : `${priority} finding`, finding_id: null });

function scan(id: string, study: string, date: string, options: Partial<Scan> = {}): Scan {
  return {
    scan_id: id,
    patient_id: 'P',
    study_uid: study,
    study_date: date,
    study_description: null,
    accession_number: null,
    modality: 'CT',
    body_part: 'HEAD',
    description: null,
    series_number: 1,
    instance_count: 10,
    status: 'analyzed',
    status_reason: null,
    ai_summary: null,
    triage: triage('routine'),
    created_at: '2026-01-01T00:00:00.000Z',
    updated_at: '2026-01-01T00:00:00.000Z',
    ...options,
  };
}

function study(uid: string, name: string, accession: string, date: string, series: Scan[]): Study {
  const ranks = ['urgent', 'soon', 'routine'] as const;
  const best = ranks.find((p) => series.some((s) => s.triage?.priority === p));
  return {
    study_uid: uid,
    patient_id: `ID-${uid}`,
    patient_name: name,
    accession_number: accession,
    study_date: date,
    study_description: 'Head',
    modalities: [...new Set(series.map((s) => s.modality))],
    series_count: series.length,
    triage: best ? triage(best) : null,
    series,
  };
}

const NONE: Filters = { search: '', modality: '', status: '', aiOnly: false };

const studies = [
  study('old-urgent', 'ÅSTRÖM^LINA', 'A-1', '20240101', [scan('s1', 'old-urgent', '20240101', { triage: triage('urgent'), series_number: 2 }), scan('s2', 'old-urgent', '20240101', { series_number: 1 })]),
  study('new-routine', 'BERG^OLA', 'B-2', '20260101', [scan('s3', 'new-routine', '20260101', { modality: 'MR' })]),
  study('new-soon', 'CARLSSON^EVA', 'C-3', '20250601', [scan('s4', 'new-soon', '20250601', { triage: triage('soon') }), scan('s5', 'new-soon', '20250601', { triage: null, status: 'received' })]),
];

describe('worklist rows', () => {
  it('puts the urgent study first by default, then soon, then routine, whatever their dates; series urgent first inside', () => {
    const rows = worklistRows(studies, NONE, DEFAULT_SORT);
    expect(rows.map((r) => r.study.study_uid)).toEqual(['old-urgent', 'new-soon', 'new-routine']);
    expect(rows[0]!.series.map((s) => s.scan_id)).toEqual(['s1', 's2']);
    // A series never analysed sorts below a routine one.
    expect(rows[1]!.series.map((s) => s.scan_id)).toEqual(['s4', 's5']);
  });

  it('by date, newest first; by priority ascending, the urgent study last', () => {
    expect(worklistRows(studies, NONE, { key: 'date', descending: true }).map((r) => r.study.study_uid)).toEqual(['new-routine', 'new-soon', 'old-urgent']);
    expect(worklistRows(studies, NONE, { key: 'priority', descending: false }).map((r) => r.study.study_uid)).toEqual(['new-routine', 'new-soon', 'old-urgent']);
  });

  it('searches names without their accents, accessions and IDs; every word must match', () => {
    const found = (search: string) => worklistRows(studies, { ...NONE, search }, DEFAULT_SORT).map((r) => r.study.study_uid);
    expect(found('astrom')).toEqual(['old-urgent']);
    expect(found('Åström, Lina')).toEqual(['old-urgent']);
    expect(found('c-3')).toEqual(['new-soon']);
    expect(found('id-new-routine')).toEqual(['new-routine']);
    expect(found('astrom eva')).toEqual([]);
  });

  it('keeps only the series that pass the filters, and drops a study left without any', () => {
    const rows = worklistRows(studies, { ...NONE, status: 'received' }, DEFAULT_SORT);
    expect(rows.map((r) => [r.study.study_uid, r.series.map((s) => s.scan_id)])).toEqual([['new-soon', ['s5']]]);
    expect(worklistRows(studies, { ...NONE, modality: 'MR' }, DEFAULT_SORT).map((r) => r.study.study_uid)).toEqual(['new-routine']);
  });
});
