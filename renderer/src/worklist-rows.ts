/**
 * The worklist's rows (issue 11, study-level reading and triage): studies from GET /v1/studies,
 * each with the series that pass the filters, sorted by one key at both levels. DOM-free, so
 * unit tests can check grouping, search and order without a browser.
 */
import { SCAN_STATUSES, URGENCIES } from '../../common/vocabulary.ts';
import type { Scan, Study, Triage } from './api/types.ts';
import { dicomDateKey } from './dicom-date.ts';
import { personName } from './person-name.ts';

export type SortKey = 'priority' | 'patient' | 'modality' | 'date' | 'status' | 'ai';
export type Sort = { key: SortKey; descending: boolean };
/** Urgent first, then the newest: the reading order triage exists for. */
export const DEFAULT_SORT: Sort = { key: 'priority', descending: true };

export type Filters = { search: string; modality: string; status: string; aiOnly: boolean };
export type StudyRow = { study: Study; series: Scan[] };

/** Case- and accent-insensitive, as the server's search (server/store/search-fold.ts). */
export function searchFold(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLocaleLowerCase('en')
    .replace(/[\^=]/g, ' ');
}

/** Higher is more urgent; a scan never analysed sorts below a routine one. */
export function priorityRank(triage: Triage | null): number {
  return triage ? URGENCIES.length - URGENCIES.indexOf(triage.priority) : 0;
}

export function patientText(study: Pick<Study, 'patient_name' | 'patient_id'>): string {
  return study.patient_name ? personName(study.patient_name) : study.patient_id;
}

function compareScans(a: Scan, b: Scan, key: SortKey): number {
  switch (key) {
    case 'priority':
      return priorityRank(a.triage) - priorityRank(b.triage);
    case 'patient':
      return a.patient_id.localeCompare(b.patient_id);
    case 'modality':
      return a.modality.localeCompare(b.modality);
    case 'date':
      // By the date read, not the text: "1997.04.24" sorts with 19970424 (issue 11).
      return dicomDateKey(a.study_date).localeCompare(dicomDateKey(b.study_date)) || a.created_at.localeCompare(b.created_at);
    case 'status':
      return SCAN_STATUSES.indexOf(a.status) - SCAN_STATUSES.indexOf(b.status);
    case 'ai':
      return (a.ai_summary?.confidence ?? -1) - (b.ai_summary?.confidence ?? -1);
  }
}

/** Ties go to the newest study, then series number: a stable order the reader can predict. */
function newestFirst(a: Scan, b: Scan): number {
  return dicomDateKey(b.study_date).localeCompare(dicomDateKey(a.study_date)) || (a.series_number ?? 1e9) - (b.series_number ?? 1e9) || a.scan_id.localeCompare(b.scan_id);
}

export function worklistRows(studies: readonly Study[], filters: Filters, sort: Sort): StudyRow[] {
  const words = searchFold(filters.search).split(/[\s,]+/).filter(Boolean);
  const direction = sort.descending ? -1 : 1;
  const bySort = (a: Scan, b: Scan) => direction * compareScans(a, b, sort.key) || newestFirst(a, b);
  const rows: StudyRow[] = [];
  for (const study of studies) {
    const studyText = searchFold([study.patient_name ?? '', study.patient_id, study.accession_number ?? '', study.study_description ?? ''].join(' '));
    const series = study.series
      .filter(
        (s) =>
          words.every((w) => studyText.includes(w) || searchFold(s.description ?? '').includes(w)) &&
          (!filters.modality || s.modality === filters.modality) &&
          (!filters.status || s.status === filters.status) &&
          (!filters.aiOnly || s.ai_summary !== null),
      )
      .sort(bySort);
    if (series.length > 0) rows.push({ study, series });
  }
  // A study sorts by what its row shows: its priority (the most urgent series), the patient's
  // name, its date; by the other keys, by its first series under the same key.
  const studyFirst = (row: StudyRow): Scan | undefined => row.series[0];
  rows.sort((a, b) => {
    const [headA, headB] = [studyFirst(a), studyFirst(b)];
    const byStudy =
      sort.key === 'priority'
        ? priorityRank(a.study.triage) - priorityRank(b.study.triage)
        : sort.key === 'patient'
          ? patientText(a.study).localeCompare(patientText(b.study))
          : sort.key === 'date'
            ? dicomDateKey(a.study.study_date).localeCompare(dicomDateKey(b.study.study_date))
            : headA && headB
              ? compareScans(headA, headB, sort.key)
              : 0;
    return (
      direction * byStudy ||
      dicomDateKey(b.study.study_date).localeCompare(dicomDateKey(a.study.study_date)) ||
      (headA && headB ? newestFirst(headA, headB) : 0) ||
      a.study.study_uid.localeCompare(b.study.study_uid)
    );
  });
  return rows;
}
