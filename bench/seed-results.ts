/**
 * The benchmarks' stored results: N analysed scans (0-2 findings each, 300 patients, CT and MR
 * alternating) and an admin key, written straight into a server's database, SQLite or
 * PostgreSQL, so every bench that lists results measures the same rows.
 */
import { issueKeyForUser } from '#server/auth/api-keys.ts';
import { systemClock } from '#server/clock.ts';
import { insertCompletedAnalysis } from '#server/store/analyses.ts';
import { upsertPatient, upsertScan, upsertStudy } from '#server/store/archive-index.ts';
import { inTransaction, type Database } from '#server/store/database.ts';
import { findOrCreateUser } from '#server/users/users.ts';

/** Stores the scans and resolves with a new admin key for the load generator. */
export async function seedAnalysedScans(db: Database, scans: number): Promise<string> {
  const at = new Date().toISOString();
  await inTransaction(db, async (tx) => {
    for (let i = 0; i < scans; i += 1) {
      const patientRef = await upsertPatient(tx, { patientId: `BENCH-${i % 300}`, name: null, birthDate: null, sex: null }, at);
      const studyRef = await upsertStudy(tx, patientRef, { studyUid: `1.2.826.0.1.9.${i}`, studyDate: '20260301', studyTime: null, description: 'Head', accessionNumber: null }, at);
      const scanRef = await upsertScan(tx, studyRef, { scanId: `1.2.826.0.1.9.${i}.1`, modality: i % 2 ? 'CT' : 'MR', bodyPart: 'HEAD', description: null, seriesNumber: 1 }, at);
      await insertCompletedAnalysis(tx, {
        scanRef,
        model: { id: 'mia-phantom-detector', name: 'mia phantom detector', version: '1.0.0', sha256: 'ab'.repeat(32) },
        thresholds: { tumor_detected: 0.5 },
        recommendation: 'Follow-up MRI in 3 months.',
        findings: Array.from({ length: i % 3 }, (_, f) => ({
          label: 'tumor_detected',
          confidence: 0.6 + f / 10,
          x: 10,
          y: 20,
          width: 30,
          height: 40,
          instanceUid: `1.2.826.0.1.9.${i}.1.${f}`,
          frame: 0,
        })),
        startedAt: at,
        finishedAt: at,
      });
    }
  });
  const { user } = await findOrCreateUser({ db, clock: systemClock }, { email: 'bench@bench.local', role: 'admin' });
  const { key } = await issueKeyForUser({ db, clock: systemClock }, { userRef: user.id, name: 'bench', extraScopes: [] });
  return key;
}
