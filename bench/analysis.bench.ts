/**
 * Analysis of a 100-slice series: slices/s end to end (a job from the stored DICOM files to the
 * stored findings: read, parse, decode, rescale, preprocess, batched session.run, decode, NMS,
 * aggregation, SQLite) side by side with bare `session.run` on the same preprocessed tensors,
 * same session and batch size, in the same run. One CT and one MR phantom series.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { InferenceSession, Tensor } from 'onnxruntime-node';
import { AnalysisQueue } from '#server/analysis/analysis-queue.ts';
import { runAnalysis, type EngineTimings } from '#server/analysis/engine.ts';
import type { InputBatch } from '#server/analysis/preprocess.ts';
import { listInstalledModels, readyModel, selectedModelId } from '#server/analysis/registry.ts';
import { systemClock } from '#server/clock.ts';
import { resolveConfig } from '#server/config.ts';
import { createFileLogger } from '#server/log.ts';
import type { Services } from '#server/services.ts';
import { openDatabase } from '#server/store/database.ts';
import { listScanInstances } from '#server/store/instances.ts';
import { findScan } from '#server/store/scans.ts';

const ROOT = join(import.meta.dirname, '..');
const SLICES = 100;
const REPS = 7;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

function sh(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')}: ${r.stderr}`);
}

type Row = { modality: string; rows: number; endToEnd: number; bare: number; bareAllCores: number; timings: EngineTimings };

/** Slices/s of bare session.run over `tensors`: median of REPS passes, after a warm-up pass. */
async function bareRate(modelPath: string, inputName: string, tensors: Tensor[], intraOpThreads: number, interOpThreads: number): Promise<number> {
  const session = await InferenceSession.create(modelPath, {
    executionProviders: ['cpu'],
    intraOpNumThreads: intraOpThreads,
    interOpNumThreads: interOpThreads,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
  });
  try {
    for (const t of tensors) await session.run({ [inputName]: t });
    const times: number[] = [];
    for (let i = 0; i < REPS; i++) {
      const t0 = performance.now();
      for (const t of tensors) await session.run({ [inputName]: t });
      times.push(performance.now() - t0);
    }
    return (SLICES * 1000) / median(times);
  } finally {
    await session.release();
  }
}

export async function run(): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), 'mia-bench-analysis-'));
  const dataDir = join(work, 'data');
  const truth = join(work, 'truth.json');
  sh('/usr/bin/python3', ['models/mia-phantom-detector/phantoms.py', '--out', join(work, 'series'), '--series', '2', '--seed', '20009500', '--modality', 'both', '--slices', String(SLICES), '--truth', truth]);
  sh(process.execPath, ['bin/mia.js', 'import', join(work, 'series'), '--data', dataDir]);
  const series = (JSON.parse(readFileSync(truth, 'utf8')) as { series: Array<{ scan_uid: string; modality: string; rows: number }> }).series;

  const config = resolveConfig({ dataDir });
  const db = openDatabase(dataDir);
  const log = createFileLogger(dataDir, false);
  const services: Services = { db, clock: systemClock, dataDir, config, log };
  const queue = new AnalysisQueue(services, { autoRun: false });
  queue.start();
  const rows: Row[] = [];
  let coldMs = 0;
  try {
    const models = await listInstalledModels(config);
    const model = readyModel(models, selectedModelId(db, config, models));
    for (const s of series) {
      const job = async (): Promise<number> => {
        const t0 = performance.now();
        const queued = await queue.enqueue(s.scan_uid, { requestedBy: 'bench' });
        const done = await queue.runJob(queued.id);
        if (done.status !== 'succeeded') throw new Error(`bench analysis ${done.status}: ${done.error ?? ''}`);
        return performance.now() - t0;
      };
      // The first job of the run also creates the session (graph load and optimisation).
      const first = await job();
      if (coldMs === 0) coldMs = first;
      const endToEnd: number[] = [];
      for (let i = 0; i < REPS; i++) endToEnd.push(await job());

      // The same tensors the engine built, replayed through a bare in-process session with the
      // engine's settings: no worker, no messages, nothing but session.run.
      const session = await queue.sessions.get(model);
      const scan = findScan(db, s.scan_uid);
      if (!scan) throw new Error('bench scan missing');
      const instances = listScanInstances(db, scan.id, 0, 100_000);
      const batches: InputBatch[] = [];
      const engineRun = await runAnalysis(
        session,
        model.manifest,
        {
          modality: scan.modality,
          bodyPart: scan.body_part,
          slices: instances.length,
          instances,
          sliceList: instances.map((r) => ({ instanceUid: r.sop_instance_uid, frame: 0, path: join(dataDir, r.file_path) })),
        },
        { batchSize: config.analysisBatchSize },
        { onInput: (b) => batches.push({ data: b.data.slice(), dims: b.dims }) },
      );
      if (engineRun.kind !== 'succeeded') throw new Error('bench engine run did not succeed');
      const tensors = batches.map((b) => new Tensor('float32', b.data, b.dims));
      const name = model.manifest.input.tensor;
      const bare = await bareRate(model.modelPath, name, tensors, config.intraOpThreads, config.interOpThreads);
      // For comparison: inference alone given every core, which the pipeline cannot have.
      const bareAllCores = await bareRate(model.modelPath, name, tensors, availableParallelism(), config.interOpThreads);
      rows.push({ modality: s.modality, rows: s.rows, endToEnd: (SLICES * 1000) / median(endToEnd), bare, bareAllCores, timings: engineRun.timings });
    }
  } finally {
    await queue.stop();
    await log.close();
    db.close();
    rmSync(work, { recursive: true, force: true });
  }

  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const cores = availableParallelism();
  const verdict = rows
    .map((r) => `${r.modality} ${(r.endToEnd / r.bare).toFixed(2)}x ${r.endToEnd / r.bare >= 0.8 ? 'meets' : 'misses'} it`)
    .join(', ');
  const lines = [
    '## Analysis',
    '',
    `A ${SLICES}-slice phantom series (256×256, 16-bit, explicit VR little endian) per modality, bundled`,
    `mia-phantom-detector, onnxruntime-node CPU in the inference worker thread, intraOpNumThreads ${config.intraOpThreads}`,
    `(the default: all cores but one, which reads and preprocesses the next batch meanwhile), interOpNumThreads`,
    `${config.interOpThreads}, batches of ${config.analysisBatchSize} slices; ${cores} cores (${cpu}), Node ${process.version},`,
    `${new Date().toISOString().slice(0, 10)}. End to end = one analysis job from the stored files to the stored findings`,
    '(read, parse, decode, rescale, preprocess, session.run, decode, NMS, aggregation, SQLite); bare = `session.run`',
    'alone, in-process, on the same preprocessed tensors and batches with the same session settings; bare on all',
    `cores = the same with intraOpNumThreads ${cores}. Medians of ${REPS} runs each, warm sessions.`,
    '',
    '| series | end to end slices/s | bare session.run slices/s | ratio | bare on all cores slices/s | read ms | preprocess ms | waiting for inference ms | decode ms |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.modality} ${SLICES} slices | ${r.endToEnd.toFixed(0)} | ${r.bare.toFixed(0)} | ${(r.endToEnd / r.bare).toFixed(2)}x | ${r.bareAllCores.toFixed(0)} | ` +
        `${r.timings.readMs.toFixed(0)} | ${r.timings.preprocessMs.toFixed(0)} | ${r.timings.inferenceMs.toFixed(0)} | ${r.timings.decodeMs.toFixed(0)} |`,
    ),
    '',
    `First job of the run, including starting the worker and its session: ${coldMs.toFixed(0)} ms. Stage times are this`,
    'thread\'s, from one engine run: waiting for inference is what preprocessing the next batch did not hide.',
    'Reproduce: `npm run bench -- analysis`.',
    '',
    `Goal 0.8x: ${verdict}. The bundled model costs ~1.5 ms a slice on one core, about what reading, parsing,`,
    'decoding and preprocessing a 256×256 slice cost here (MR adds its exact percentile histogram), so the two',
    'stages must overlap for the ratio to approach 1; they do, in two threads, and what remains is the first batch',
    '(preprocessed before any inference can start) and the stretches where preprocessing is the slower stage.',
    '',
  ];
  return lines.join('\n');
}
