/**
 * Puts patients, scans and analyses into a test server's real database through the store layer,
 * standing in for the import and analysis pipelines where a test is about the API only.
 */
import { inTransaction } from '#server/store/database.ts';
import type { Database } from '#server/store/database.ts';
import { insertCompletedAnalysis, type FindingInput, type TriageLabels } from '#server/store/analyses.ts';
import { upsertPatient, upsertScan, upsertStudy, type InstanceInput } from '#server/store/archive-index.ts';

export type SeededScan = { scanId: string; patientId: string; studyUid: string; scanRef: number };

let counter = 0;

export function uid(prefix = '1.2.826.0.1.3680043.10.1000'): string {
  counter += 1;
  return `${prefix}.${process.pid}.${counter}`;
}

export async function seedScan(
  db: Database,
  options: {
    patientId?: string;
    modality?: string;
    description?: string;
    at?: string;
    /** The study's values; a study seeded before keeps the ones it was first given. */
    study?: { uid?: string; patientName?: string; date?: string; description?: string; accession?: string };
    seriesNumber?: number;
  } = {},
): Promise<SeededScan> {
  const at = options.at ?? '2026-03-01T08:00:00.000Z';
  const patientId = options.patientId ?? `PAT-${uid('').slice(1)}`;
  const studyUid = options.study?.uid ?? uid();
  const scanId = uid();
  const scanRef = await inTransaction(db, async (tx) => {
    const patientRef = await upsertPatient(tx, { patientId, name: options.study?.patientName ?? 'Doe^Jane', birthDate: '19700101', sex: 'F' }, at);
    const studyRef = await upsertStudy(
      tx,
      patientRef,
      {
        studyUid,
        studyDate: options.study?.date ?? '20260301',
        studyTime: '080000',
        description: options.study?.description ?? 'Head',
        accessionNumber: options.study?.accession ?? 'ACC1',
      },
      at,
    );
    return await upsertScan(
      tx,
      studyRef,
      { scanId, modality: options.modality ?? 'MR', bodyPart: 'HEAD', description: options.description ?? 'T1 axial', seriesNumber: options.seriesNumber ?? 1 },
      at,
    );
  });
  return { scanId, patientId, studyUid, scanRef };
}

export async function seedAnalysis(
  db: Database,
  scan: SeededScan,
  findings: readonly Partial<FindingInput>[],
  options: {
    recommendation?: string;
    version?: string;
    setStatus?: boolean;
    thresholds?: Record<string, number>;
    /** Label urgencies as stored with the analysis; none by default (every finding routine). */
    triageLabels?: TriageLabels;
  } = {},
): Promise<void> {
  await inTransaction(db, async (tx) => {
    await insertCompletedAnalysis(tx, {
      scanRef: scan.scanRef,
      model: { id: 'mia-phantom-detector', name: 'mia phantom detector', version: options.version ?? '1.0.0', sha256: 'ab'.repeat(32) },
      thresholds: options.thresholds ?? { tumor_detected: 0.5 },
      ...(options.triageLabels ? { triageLabels: options.triageLabels } : {}),
      recommendation: options.recommendation ?? 'Follow-up MRI in 3 months.',
      findings: findings.map((f, i) => ({
        label: f.label ?? 'tumor_detected',
        confidence: f.confidence ?? 0.9,
        x: f.x ?? 10 + i,
        y: f.y ?? 20,
        width: f.width ?? 30,
        height: f.height ?? 40,
        instanceUid: f.instanceUid ?? uid(),
        frame: f.frame ?? 0,
        ...(f.localization ? { localization: f.localization } : {}),
        ...(f.mask ? { mask: f.mask } : {}),
      })),
      startedAt: '2026-03-01T08:01:00.000Z',
      finishedAt: '2026-03-01T08:01:05.000Z',
    });
    if (options.setStatus !== false) {
      (await tx.run(`UPDATE scans SET status = 'analyzed' WHERE id = ?`, [scan.scanRef]));
    }
  });
}

/**
 * An instance row's input with a plain 16-bit greyscale image's values, for tests about the index
 * (places, files listed for sync) rather than the file: `overrides` sets what the test is about.
 */
export function instanceInput(overrides: Partial<InstanceInput> & Pick<InstanceInput, 'sopInstanceUid' | 'filePath' | 'fileSha256'>): InstanceInput {
  return {
    sopClassUid: '1.2.840.10008.5.1.4.1.1.2',
    transferSyntax: '1.2.840.10008.1.2.1',
    rows: 256,
    columns: 256,
    frames: 1,
    instanceNumber: 1,
    position: null,
    pixelSpacing: null,
    fileSize: 1,
    imaging: {
      samplesPerPixel: 1,
      photometric: 'MONOCHROME2',
      bitsAllocated: 16,
      bitsStored: 12,
      pixelRepresentation: 0,
      rescaleSlope: 1,
      rescaleIntercept: 0,
      windowCenter: null,
      windowWidth: null,
      imagePosition: null,
      imageOrientation: null,
      frameValues: null,
      framesProblem: null,
    },
    ...overrides,
  };
}
