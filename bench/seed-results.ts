/**
 * The benchmarks' stored results: N analysed scans (0-2 findings each, 300 patients, CT and MR
 * alternating) and an admin key, written straight into a server's database, SQLite or
 * PostgreSQL, so every bench that lists results measures the same rows. With `slices`, each
 * series also has that many instance rows (the findings on its first two), as an imported one
 * does: a result's slice number and size in mm are read from them.
 */
import { issueKeyForUser } from '#server/auth/api-keys.ts';
import { systemClock } from '#server/clock.ts';
import { insertCompletedAnalysis } from '#server/store/analyses.ts';
import { countScanInstances, insertUncountedInstance, upsertPatient, upsertScan, upsertStudy } from '#server/store/archive-index.ts';
import { encodeSpacing } from '#server/store/instances.ts';
import { inTransaction, type Database } from '#server/store/database.ts';
import { findOrCreateUser } from '#server/users/users.ts';

/** Stores the scans and resolves with a new admin key for the load generator. */
export async function seedAnalysedScans(db: Database, scans: number, options: { slices?: number } = {}): Promise<string> {
  const slices = options.slices ?? 0;
  const at = new Date().toISOString();
  await inTransaction(db, async (tx) => {
    for (let i = 0; i < scans; i += 1) {
      const patientRef = await upsertPatient(tx, { patientId: `BENCH-${i % 300}`, name: null, birthDate: null, sex: null }, at);
      const studyRef = await upsertStudy(tx, patientRef, { studyUid: `1.2.826.0.1.9.${i}`, studyDate: '20260301', studyTime: null, description: 'Head', accessionNumber: null }, at);
      const scanRef = await upsertScan(tx, studyRef, { scanId: `1.2.826.0.1.9.${i}.1`, modality: i % 2 ? 'CT' : 'MR', bodyPart: 'HEAD', description: null, seriesNumber: 1 }, at);
      for (let n = 0; n < slices; n += 1) {
        await insertUncountedInstance(tx, scanRef, {
          sopInstanceUid: `1.2.826.0.1.9.${i}.1.${n}`,
          sopClassUid: '1.2.840.10008.5.1.4.1.1.2',
          transferSyntax: '1.2.840.10008.1.2.1',
          rows: 512,
          columns: 512,
          frames: 1,
          instanceNumber: n + 1,
          position: n * 2.5,
          pixelSpacing: encodeSpacing([0.5, 0.5], 'pixel_spacing'),
          filePath: `archive/bench/${i}/${n}.dcm`,
          fileSha256: `${i}.${n}`.padEnd(64, '0'),
          fileSize: 525_000,
          imaging: {
            samplesPerPixel: 1,
            photometric: 'MONOCHROME2',
            bitsAllocated: 16,
            bitsStored: 12,
            pixelRepresentation: 0,
            rescaleSlope: 1,
            rescaleIntercept: -1024,
            windowCenter: 40,
            windowWidth: 400,
            imagePosition: JSON.stringify([-128, -128, n * 2.5]),
            imageOrientation: JSON.stringify([1, 0, 0, 0, 1, 0]),
            frameValues: null,
            framesProblem: null,
          },
        }, at);
      }
      if (slices > 0) await countScanInstances(tx, scanRef, slices, at);
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
