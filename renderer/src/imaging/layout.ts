/**
 * The viewer's layouts (1x1, 1x2, 2x2) and which series fills each pane when a layout opens:
 * pure, so the choice is testable. Pane 0 is always the scan the viewer was opened on (the
 * primary: findings, review, measurements); the others show series of the same patient.
 */
import type { Scan } from '../api/types.ts';
import { dicomDateKey } from '../dicom-date.ts';

export const LAYOUTS = ['1x1', '1x2', '2x2'] as const;
export type Layout = (typeof LAYOUTS)[number];

export const paneCount = (layout: Layout): number => (layout === '1x1' ? 1 : layout === '1x2' ? 2 : 4);

/** The next layout for the layout key (l): 1x1 -> 1x2 -> 2x2 -> 1x1. */
export const nextLayout = (layout: Layout): Layout => LAYOUTS[(LAYOUTS.indexOf(layout) + 1) % LAYOUTS.length] ?? '1x1';

/** True when `scan`'s study is older than the primary's (by study date): the pane says PRIOR. */
export function isPrior(primary: Pick<Scan, 'study_uid' | 'study_date'>, scan: Pick<Scan, 'study_uid' | 'study_date'>): boolean {
  if (scan.study_uid === primary.study_uid) return false;
  const mine = dicomDateKey(primary.study_date);
  const theirs = dicomDateKey(scan.study_date);
  // Only real dates compare: a value that is not a date never makes a study a prior.
  return /^\d{8}$/.test(mine) && /^\d{8}$/.test(theirs) && theirs < mine;
}

/**
 * Series for the empty panes, in the order a reader compares: for the second pane the most
 * recent prior of the same modality (the comparison every report needs), else the study's next
 * series; then the study's other series in series order, then older priors, newest first.
 * `taken` are scan ids already shown; `slots` how many to choose.
 */
export function autoFill(primary: Scan, scans: readonly Scan[], taken: readonly string[], slots: number): Scan[] {
  const free = scans.filter((s) => !taken.includes(s.scan_id) && s.scan_id !== primary.scan_id);
  const byNumber = (a: Scan, b: Scan) => (a.series_number ?? Infinity) - (b.series_number ?? Infinity) || a.scan_id.localeCompare(b.scan_id);
  const newestFirst = (a: Scan, b: Scan) => dicomDateKey(b.study_date).localeCompare(dicomDateKey(a.study_date)) || byNumber(a, b);
  const priors = free.filter((s) => isPrior(primary, s)).sort(newestFirst);
  const sameModalityPriors = priors.filter((s) => s.modality === primary.modality);
  const study = free.filter((s) => s.study_uid === primary.study_uid).sort(byNumber);
  // "Next" series: after the primary in series order, wrapping to the ones before it.
  const after = study.filter((s) => (s.series_number ?? Infinity) > (primary.series_number ?? -Infinity));
  const nextInStudy = [...after, ...study.filter((s) => !after.includes(s))];
  const others = free.filter((s) => s.study_uid !== primary.study_uid && !isPrior(primary, s)).sort(newestFirst);
  const order = [...sameModalityPriors.slice(0, 1), ...nextInStudy, ...priors, ...others];
  const chosen: Scan[] = [];
  for (const scan of order) {
    if (chosen.length >= slots) break;
    if (!chosen.includes(scan)) chosen.push(scan);
  }
  return chosen;
}
