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

// What sorting and searching read from a study or series, worked out once per object and kept
// while the object lives: the studies a reading returned stay the same objects across every
// filtering and sorting of them, and at 40,000 studies (issue 15) redoing a date parse, a name
// format or an accent fold in each comparison cost a second or more per keystroke.
const dateKeys = new WeakMap<Scan | Study, string>();
const patientTexts = new WeakMap<Study, string>();
const studyTexts = new WeakMap<Study, string>();
const seriesTexts = new WeakMap<Scan, string>();

function cached<K extends object>(cache: WeakMap<K, string>, item: K, make: (item: K) => string): string {
  let value = cache.get(item);
  if (value === undefined) {
    value = make(item);
    cache.set(item, value);
  }
  return value;
}

const dateKeyOf = (item: Scan | Study): string => cached(dateKeys, item, (i) => dicomDateKey(i.study_date));
const patientTextOf = (study: Study): string => cached(patientTexts, study, patientText);
const studyTextOf = (study: Study): string =>
  cached(studyTexts, study, (s) => searchFold([s.patient_name ?? '', s.patient_id, s.accession_number ?? '', s.study_description ?? ''].join(' ')));
const seriesTextOf = (scan: Scan): string => cached(seriesTexts, scan, (s) => searchFold(s.description ?? ''));

/**
 * Folds the search text of `studies` ahead of the first search, a slice at a time while the
 * browser is idle, so that search answers from the cache (40,000 folds took ~150 ms on the
 * first keystroke). Stops when `signal` aborts.
 */
export function warmSearch(studies: readonly Study[], signal: AbortSignal, idle: (work: () => void) => void): void {
  let next = 0;
  const slice = () => {
    if (signal.aborted) return;
    for (const end = Math.min(studies.length, next + 2000); next < end; next += 1) {
      const study = studies[next]!;
      studyTextOf(study);
      for (const scan of study.series) seriesTextOf(scan);
    }
    if (next < studies.length) idle(slice);
  };
  idle(slice);
}

/** String.prototype.localeCompare's order (ECMA-402 defines it as this collator's), without
 * setting up the comparison on every call: for what people wrote (names, IDs, modalities). */
const text = new Intl.Collator().compare;
/** For what machines wrote (date keys, ISO times, UIDs: digits and punctuation), whose code-unit
 * order is the collator's, at a fraction of its cost. */
const plain = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

function compareScans(a: Scan, b: Scan, key: SortKey): number {
  switch (key) {
    case 'priority':
      return priorityRank(a.triage) - priorityRank(b.triage);
    case 'patient':
      return text(a.patient_id, b.patient_id);
    case 'modality':
      return text(a.modality, b.modality);
    case 'date':
      // By the date read, not the text: "1997.04.24" sorts with 19970424 (issue 11).
      return plain(dateKeyOf(a), dateKeyOf(b)) || plain(a.created_at, b.created_at);
    case 'status':
      return SCAN_STATUSES.indexOf(a.status) - SCAN_STATUSES.indexOf(b.status);
    case 'ai':
      return (a.ai_summary?.confidence ?? -1) - (b.ai_summary?.confidence ?? -1);
  }
}

/** Ties go to the newest study, then series number: a stable order the reader can predict. */
function newestFirst(a: Scan, b: Scan): number {
  return plain(dateKeyOf(b), dateKeyOf(a)) || (a.series_number ?? 1e9) - (b.series_number ?? 1e9) || plain(a.scan_id, b.scan_id);
}

export function worklistRows(studies: readonly Study[], filters: Filters, sort: Sort): StudyRow[] {
  const words = searchFold(filters.search).split(/[\s,]+/).filter(Boolean);
  const direction = sort.descending ? -1 : 1;
  const bySort = (a: Scan, b: Scan) => direction * compareScans(a, b, sort.key) || newestFirst(a, b);
  const rows: StudyRow[] = [];
  const filtering = words.length > 0 || filters.modality !== '' || filters.status !== '' || filters.aiOnly;
  for (const study of studies) {
    const studyText = words.length > 0 ? studyTextOf(study) : '';
    const series = filtering
      ? study.series.filter(
          (s) =>
            (!filters.modality || s.modality === filters.modality) &&
            (!filters.status || s.status === filters.status) &&
            (!filters.aiOnly || s.ai_summary !== null) &&
            words.every((w) => studyText.includes(w) || seriesTextOf(s).includes(w)),
        )
      : study.series.slice();
    if (series.length > 1) series.sort(bySort);
    if (series.length > 0) rows.push({ study, series });
  }
  // A study sorts by what its row shows: its priority (the most urgent series), the patient's
  // name, its date; by the other keys, by its first series under the same key. Each row's keys
  // are read once, before the sort's many comparisons.
  const keyed = rows.map((row) => ({
    row,
    rank: priorityRank(row.study.triage),
    date: dateKeyOf(row.study),
    name: sort.key === 'patient' ? patientTextOf(row.study) : '',
    head: row.series[0],
  }));
  type Keyed = (typeof keyed)[number];
  const byStudy = (a: Keyed, b: Keyed): number =>
    sort.key === 'priority'
      ? a.rank - b.rank
      : sort.key === 'patient'
        ? text(a.name, b.name)
        : sort.key === 'date'
          ? plain(a.date, b.date)
          : a.head && b.head
            ? compareScans(a.head, b.head, sort.key)
            : 0;
  keyed.sort(
    (a, b) => direction * byStudy(a, b) || plain(b.date, a.date) || (a.head && b.head ? newestFirst(a.head, b.head) : 0) || plain(a.row.study.study_uid, b.row.study.study_uid),
  );
  return keyed.map((k) => k.row);
}
