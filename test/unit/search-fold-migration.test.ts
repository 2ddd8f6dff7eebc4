/**
 * Migration 35 on a database written before it: patients and studies stored then get their
 * folded text, so the worklist's search and QIDO-RS name matching (which read the folded
 * columns, not the values) still find them; rows written after it are folded as they are stored.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, expect, it } from 'vitest';
import { searchIndex, type QidoCondition } from '#server/store/dicomweb-index.ts';
import { searchFold, searchWords } from '#server/store/search-fold.ts';
import { openDatabase, type SqliteDatabase } from '#server/store/sqlite.ts';
import { listStudies } from '#server/store/studies.ts';
import { seedScan } from '../helpers/seed.ts';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function found(db: SqliteDatabase, search: string): Promise<string[]> {
  const page = await listStudies(db, { words: searchWords(search) }, { afterId: 0, limit: 50 });
  return page.items.map((s) => s.patient_id).sort();
}

async function qidoNames(db: SqliteDatabase, condition: QidoCondition): Promise<string[]> {
  const { rows } = await searchIndex(db, 'study', [condition], { offset: 0, limit: 50 });
  return rows.map((r) => r.patient_id).sort();
}

it('folds the patients and studies stored before migration 35, and every one stored after', async () => {
  dir = mkdtempSync(join(tmpdir(), 'mia-migration-35-'));
  const db = openDatabase(dir);
  await seedScan(db, { patientId: 'P-OLD-1', study: { patientName: 'Müller^Zoë', accession: 'ACC-7731', description: 'CT Schädel nativ' } });
  await seedScan(db, { patientId: 'P-OLD-2', study: { patientName: 'MÜLLER-LÜDENSCHEIDT^ANNA', accession: 'X1', description: 'MR Head' } });
  // Back to the schema of version 34.
  db.connection.exec('DROP INDEX patients_name_fold; ALTER TABLE patients DROP COLUMN name_fold; ALTER TABLE patients DROP COLUMN patient_id_fold; ALTER TABLE studies DROP COLUMN text_fold');
  db.connection.pragma('user_version = 34');
  await db.close();

  const upgraded = openDatabase(dir);
  try {
    await seedScan(upgraded, { patientId: 'p-new-3', study: { patientName: 'Mueller^Zoe', accession: 'acc-9', description: 'Thorax' } });
    // Name, patient ID, accession and description, case and accents aside, every word somewhere.
    expect(await found(upgraded, 'muller')).toEqual(['P-OLD-1', 'P-OLD-2']);
    expect(await found(upgraded, 'ZOE schadel')).toEqual(['P-OLD-1']);
    expect(await found(upgraded, 'acc-7731')).toEqual(['P-OLD-1']);
    expect(await found(upgraded, 'p-old-2 anna')).toEqual(['P-OLD-2']);
    expect(await found(upgraded, 'P-NEW-3 zoe thorax')).toEqual(['p-new-3']);
    expect(await found(upgraded, 'zoe')).toEqual(['P-OLD-1', 'p-new-3']);
    // QIDO-RS PatientName: exact, wildcard and fuzzy, as qido.ts builds them (folded values).
    expect(await qidoNames(upgraded, { kind: 'equals', column: 'patient_name', value: searchFold('Müller^Zoë'), folded: true })).toEqual(['P-OLD-1']);
    expect(await qidoNames(upgraded, { kind: 'wildcard', column: 'patient_name', pattern: searchFold('MULLER*'), folded: true })).toEqual(['P-OLD-1', 'P-OLD-2']);
    expect(await qidoNames(upgraded, { kind: 'words', column: 'patient_name', words: ['muller', 'ann'] })).toEqual(['P-OLD-2']);
    expect(await qidoNames(upgraded, { kind: 'words', column: 'patient_name', words: ['mue'] })).toEqual(['p-new-3']);
  } finally {
    await upgraded.close();
  }
});
