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

type Row = { modality: string; rows: number; endToEnd: number; bare: number; timings: EngineTimings };

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
      const bareSession = await InferenceSession.create(model.modelPath, {
        executionProviders: ['cpu'],
        intraOpNumThreads: config.intraOpThreads,
        interOpNumThreads: config.interOpThreads,
        graphOptimizationLevel: 'all',
        executionMode: 'sequential',
      });
      const tensors = batches.map((b) => new Tensor('float32', b.data, b.dims));
      for (const t of tensors) await bareSession.run({ [model.manifest.input.tensor]: t });
      const bare: number[] = [];
      for (let i = 0; i < REPS; i++) {
        const t0 = performance.now();
        for (const t of tensors) await bareSession.run({ [model.manifest.input.tensor]: t });
        bare.push(performance.now() - t0);
      }
      await bareSession.release();
      rows.push({ modality: s.modality, rows: s.rows, endToEnd: (SLICES * 1000) / median(endToEnd), bare: (SLICES * 1000) / median(bare), timings: engineRun.timings });
    }
  } finally {
    await queue.stop();
    await log.close();
    db.close();
    rmSync(work, { recursive: true, force: true });
  }

  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  const lines = [
    '## Analysis',
    '',
    `A ${SLICES}-slice phantom series (256×256, 16-bit, explicit VR little endian) per modality, bundled`,
    `mia-phantom-detector, onnxruntime-node CPU, intraOpNumThreads ${config.intraOpThreads}, interOpNumThreads`,
    `${config.interOpThreads}, batches of ${config.analysisBatchSize} slices; ${availableParallelism()} cores (${cpu}), Node ${process.version},`,
    `${new Date().toISOString().slice(0, 10)}. End to end = one analysis job from the stored files to the stored findings`,
    '(read, parse, decode, rescale, preprocess, session.run, decode, NMS, aggregation, SQLite); bare = `session.run`',
    `alone on the same preprocessed tensors and batches, same session. Medians of ${REPS} runs each, warm session.`,
    '',
    '| series | end to end slices/s | bare session.run slices/s | ratio | read ms | preprocess ms | inference ms | decode ms |',
    '|---|---|---|---|---|---|---|---|',
    ...rows.map(
      (r) =>
        `| ${r.modality} ${SLICES} slices | ${r.endToEnd.toFixed(0)} | ${r.bare.toFixed(0)} | ${(r.endToEnd / r.bare).toFixed(2)}x | ` +
        `${r.timings.readMs.toFixed(0)} | ${r.timings.preprocessMs.toFixed(0)} | ${r.timings.inferenceMs.toFixed(0)} | ${r.timings.decodeMs.toFixed(0)} |`,
    ),
    '',
    `First job of the run, including session creation: ${coldMs.toFixed(0)} ms. Stage times are from one engine run`,
    '(read = waiting for file reads not hidden behind the previous batch). Reproduce: `npm run bench -- analysis`.',
    '',
    'The 0.8x goal is not met: the bundled model is so small that `session.run` costs ~0.3 ms a slice, less than',
    'parsing, decoding and normalising one 256×256 16-bit slice on one core (~0.7 ms CT; MR adds its percentile',
    'histogram). `session.run` in onnxruntime-node 1.30 holds the event loop while it computes (measured: JS work',
    'does not overlap it), so overlapping preprocessing with inference would need a worker thread, which on 2 cores',
    'competes with onnxruntime\'s second intra-op thread. With a model of realistic size (10-100x the compute) the',
    'same per-slice overhead would put the ratio near 1.',
    '',
  ];
  return lines.join('\n');
}
