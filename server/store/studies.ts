/** SQL for studies (StudyInstanceUID) with their patient: the worklist's study rows. */
import { allOf } from '#server/store/conditions.ts';
import { jsonElements, perDialect, type Database } from '#server/store/database.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type StudyRow = {
  id: number;
  study_uid: string;
  patient_id: string;
  patient_name: string | null;
  accession_number: string | null;
  study_date: string | null;
  study_description: string | null;
};

export type StudyFilter = {
  patientId?: string | undefined;
  /** Folded words (searchFold) that must each appear in the name, patient ID, accession or description. */
  words?: readonly string[] | undefined;
};

export async function listStudies(db: Database, filter: StudyFilter, page: PageRequest): Promise<Page<StudyRow>> {
  const rows = (await db.all(perDialect((d) => `SELECT st.id, st.study_uid, p.patient_id, p.name AS patient_name, st.accession_number, st.study_date,
              st.description AS study_description
       FROM studies st JOIN patients p ON p.id = st.patient_ref
       WHERE st.id > @after AND EXISTS (SELECT 1 FROM scans s WHERE s.study_ref = st.id)
         AND ${allOf([
           filter.patientId !== undefined && 'p.patient_id = @patientId',
           (filter.words ?? []).length > 0 && `NOT EXISTS (
             SELECT 1 FROM ${jsonElements(d, '@words')}
             WHERE ${d === 'sqlite' ? 'instr' : 'strpos'}(p.name_fold || ' ' || p.patient_id_fold || ' ' || st.text_fold, value) = 0)`,
         ])}
       ORDER BY st.id LIMIT @limit`), {
      after: page.afterId,
      limit: page.limit + 1,
      patientId: filter.patientId ?? null,
      words: JSON.stringify(filter.words ?? []),
    })) as StudyRow[];
  return toPage(rows, page.limit);
}
