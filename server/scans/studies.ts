/**
 * Studies with their series, for study-level reading (issue 11): the worklist groups series by
 * study and shows the patient's name, accession, date and description, and the most urgent
 * triage of the study's series.
 */
import type { Scan, Study } from '#server/api/schemas.ts';
import type { Page, PageRequest } from '#server/store/page.ts';
import { listScansOfStudies } from '#server/store/scans.ts';
import { searchWords } from '#server/store/search-fold.ts';
import { listStudies as listStudyRows } from '#server/store/studies.ts';
import { withSummaries, type ScanDeps } from '#server/scans/scans.ts';
import { highestTriage } from '#server/scans/triage.ts';

export type StudyQuery = { q?: string | undefined; patientId?: string | undefined };

export async function listStudies(deps: ScanDeps, query: StudyQuery, page: PageRequest): Promise<Page<Study>> {
  const rows = await listStudyRows(deps.db, { patientId: query.patientId, words: query.q === undefined ? undefined : searchWords(query.q) }, page);
  const scanRows = await listScansOfStudies(deps.db, rows.items.map((row) => row.id));
  const scans = await withSummaries(deps, scanRows);
  const byStudy = new Map<number, Scan[]>();
  scanRows.forEach((row, i) => {
    const scan = scans[i];
    if (!scan) return;
    const list = byStudy.get(row.study_ref) ?? [];
    list.push(scan);
    byStudy.set(row.study_ref, list);
  });
  const items = rows.items.map((row): Study => {
    const series = byStudy.get(row.id) ?? [];
    return {
      study_uid: row.study_uid,
      patient_id: row.patient_id,
      patient_name: row.patient_name,
      accession_number: row.accession_number,
      study_date: row.study_date,
      study_description: row.study_description,
      modalities: [...new Set(series.map((s) => s.modality))].sort(),
      series_count: series.length,
      triage: highestTriage(series.map((s) => s.triage)),
      series,
    };
  });
  return { items, nextAfterId: rows.nextAfterId };
}
