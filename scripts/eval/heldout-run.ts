/**
 * Runs a model over held-out phantoms the way a user's scans go: the generator writes DICOM
 * series, `mia import`'s code imports them into a fresh data folder, and the analysis queue runs
 * the model on each (the same preprocessing, inference worker, decoding and linking as
 * `mia serve`). The model runs from a copy of its folder whose thresholds are lowered to a floor
 * and whose calibration is removed, so every candidate comes back with its raw score; scoring,
 * calibration and operating points are decided from those (eval/run.ts).
 */
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { systemClock } from '#server/clock.ts';
import { importCommand } from '#server/cli/import-command.ts';
import { createRuntime } from '#server/runtime.ts';
import { findFindingsByAnalyses } from '#server/store/analyses.ts';
import { findActiveAnalysis, listScansToAnalyse } from '#server/store/analysis-jobs.ts';
import { findScan } from '#server/store/scans.ts';
import { readTruth, type Candidate, type ScoredSeries, type Truth } from './truth.ts';

export const PYTHON = '/usr/bin/python3';

/** Candidates below this raw score are not kept: far below any useful operating point. */
export const SCORE_FLOOR = 0.05;

export type Split = { name: string; seedBase: number; series: number };

export function generate(generator: string, split: Split, dir: string): Truth {
  mkdirSync(dir, { recursive: true });
  // Beside the folder, not in it: the import would report the JSON file as not DICOM.
  const truthPath = `${dir}.truth.json`;
  const run = spawnSync(
    PYTHON,
    [generator, '--out', dir, '--series', String(split.series), '--seed', String(split.seedBase), '--modality', 'both', '--truth', truthPath],
    { encoding: 'utf8', stdio: ['ignore', 'ignore', 'pipe'] },
  );
  if (run.status !== 0) throw new Error(`${basename(generator)} failed (${run.status ?? run.signal}): ${run.stderr.slice(-2000)}`);
  return readTruth(truthPath);
}

/** A copy of the model folder that reports every candidate above the floor, on the raw scale. */
export function candidateModel(modelDir: string, into: string): string {
  const id = basename(modelDir);
  const dir = join(into, id);
  cpSync(modelDir, dir, { recursive: true });
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as Record<string, unknown> & { labels: { threshold: number }[] };
  for (const label of manifest.labels) label.threshold = SCORE_FLOOR;
  delete manifest['calibration'];
  delete manifest['operating_points'];
  delete manifest['default_operating_point'];
  writeFileSync(join(dir, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return id;
}

type Found = Omit<Candidate, 'sliceIndex'> & { instanceUid: string };

const quiet = { out: () => undefined, err: () => undefined, stderrIsTty: false, writeErr: () => undefined };

/** Imports the series and analyses each; candidates per series in truth order. */
export async function analyse(
  dicomDir: string,
  truth: Truth,
  options: { dataDir: string; modelsDir: string; modelId: string; log: (line: string) => void },
): Promise<ScoredSeries[]> {
  const status = await importCommand([dicomDir], { dataDir: options.dataDir }, quiet);
  if (status !== 0) throw new Error(`import of ${dicomDir} ended with status ${status}`);
  const runtime = await createRuntime({ dataDir: options.dataDir, modelsDirs: [options.modelsDir], logToStderr: false, clock: systemClock }, { background: false });
  try {
    await runtime.start();
    const { db, analyses: queue } = runtime;
    const byScan = new Map<string, Found[]>();
    const scans = await listScansToAnalyse(db);
    let done = 0;
    for (const { scan_id: scanId } of scans) {
      const scan = await findScan(db, scanId);
      const active = scan ? await findActiveAnalysis(db, scan.id) : undefined;
      const job = active ?? (await queue.enqueue(scanId, { modelId: options.modelId, requestedBy: 'eval' }));
      const final = await queue.runJob(job.id);
      if (final.status !== 'succeeded') throw new Error(`analysis of scan ${scanId} ended ${final.status}: ${final.error ?? ''}`);
      const rows = (await findFindingsByAnalyses(db, [final.id])).get(final.id) ?? [];
      byScan.set(scanId, rows.map((f) => ({ label: f.label, score: f.confidence, box: { x: f.x, y: f.y, width: f.width, height: f.height }, instanceUid: f.instance_uid })));
      done += 1;
      if (done % 25 === 0 || done === scans.length) options.log(`  analysed ${done}/${scans.length} series`);
    }
    return truth.series.map((t) => {
      const found = byScan.get(t.scan_uid);
      if (found === undefined) throw new Error(`series ${t.seed} (${t.scan_uid}) was not imported or not analysed`);
      const sliceOf = new Map(t.instance_uids.map((uid, i) => [uid, i]));
      return {
        truth: t,
        candidates: found.map(({ instanceUid, ...c }) => {
          const slice = sliceOf.get(instanceUid);
          if (slice === undefined) throw new Error(`a finding on series ${t.seed} names instance ${instanceUid}, not in its truth`);
          return { ...c, sliceIndex: slice };
        }),
      };
    });
  } finally {
    await runtime.stop();
  }
}
