/**
 * One analysis of one scan with one model: stored files -> decoded pixels -> modality values ->
 * model input (preprocess.ts, the training-time definition) -> batched session.run -> boxes
 * (decode.ts, per-label thresholds, NMS) -> findings across slices (aggregate.ts) -> the
 * recommendation (recommend.ts). Batches are bounded (config.analysisBatchSize) so memory stays
 * flat on long series. Three stages overlap: the files of batch k+2 are read on the thread pool
 * and batch k+1 is decoded and preprocessed here while the inference worker runs batch k.
 */
import { readFile } from 'node:fs/promises';
import { aggregateFindings } from '#server/analysis/aggregate.ts';
import { imageTypeReason, notApplicableReason, type ScanFacts } from '#server/analysis/applicability.ts';
import { clampBox, decodeOutputs, type ImageSize, type Tensor } from '#server/analysis/decode.ts';
import type { Manifest } from '#server/analysis/manifest.ts';
import type { Detection } from '#server/analysis/nms.ts';
import { preprocessSlice, type InputBatch } from '#server/analysis/preprocess.ts';
import { recommend } from '#server/analysis/recommend.ts';
import { thresholdsOf } from '#server/analysis/registry.ts';
import type { InferenceSession } from '#server/analysis/worker-session.ts';
import { parseDicom, type DicomInstance } from '#server/dicom/parse.ts';
import { decodeFrame } from '#server/dicom/pixels.ts';
import { MiaError } from '#server/errors.ts';
import type { FindingInput } from '#server/store/analyses.ts';

/** One slice of the scan in slice order: a frame of a stored instance. */
export type EngineSlice = { instanceUid: string; frame: number; path: string };

export type EngineScan = ScanFacts & { sliceList: readonly EngineSlice[] };

export type EngineHooks = {
  /** After each batch; returning false stops the run (cancel, shutdown, job taken over). */
  onProgress?: (done: number, total: number) => boolean;
  signal?: AbortSignal | undefined;
  /** Sees each model input batch (the benchmark replays them through bare session.run). */
  onInput?: (batch: InputBatch) => void;
};

/** Time this thread spent in each stage; inferenceMs is waiting for results not hidden behind preprocessing. */
export type EngineTimings = { readMs: number; preprocessMs: number; inferenceMs: number; decodeMs: number };

export type EngineResult =
  | {
      kind: 'succeeded';
      findings: FindingInput[];
      recommendation: string;
      thresholds: Record<string, number>;
      slices: number;
      timings: EngineTimings;
    }
  | { kind: 'not_applicable'; reason: string }
  | { kind: 'stopped' };

type LoadedFile = { bytes: Uint8Array; instance: DicomInstance };

function fileError(slice: EngineSlice, what: string, reason: string): MiaError {
  return new MiaError('unprocessable', `instance ${slice.instanceUid}: ${what}: ${reason}`.slice(0, 500));
}

async function readFiles(slices: readonly EngineSlice[]): Promise<Map<string, Uint8Array | Error>> {
  const paths = [...new Set(slices.map((s) => s.path))];
  const read = await Promise.all(
    paths.map((p) =>
      readFile(p).then(
        (buf) => new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength),
        (err: unknown) => (err instanceof Error ? err : new Error('unreadable')),
      ),
    ),
  );
  return new Map(paths.map((p, i) => [p, read[i] as Uint8Array | Error]));
}

type PreparedBatch = { input: InputBatch; sizes: ImageSize[] };

/** Stored files of one batch -> its model input; a file the model cannot take ends the run. */
class BatchLoader {
  readonly #manifest: Manifest;
  readonly #modality: string;
  /** The last parsed file: a multi-frame instance is parsed once for all its frames. */
  #parsed: (LoadedFile & { path: string }) | null = null;
  #stored = new Float32Array(0);

  constructor(manifest: Manifest, modality: string) {
    this.#manifest = manifest;
    this.#modality = modality;
  }

  async load(batch: readonly EngineSlice[], files: Map<string, Uint8Array | Error>): Promise<PreparedBatch | { notApplicable: string }> {
    const { height, width } = this.#manifest.input.size;
    const plane = height * width;
    const data = new Float32Array(batch.length * plane);
    const sizes: ImageSize[] = [];
    for (const [i, slice] of batch.entries()) {
      let loaded = this.#parsed?.path === slice.path ? this.#parsed : null;
      if (!loaded) {
        const bytes = files.get(slice.path);
        if (bytes === undefined || bytes instanceof Error) throw fileError(slice, 'stored file unreadable', bytes?.message ?? 'missing');
        const result = parseDicom(bytes);
        if (!result.ok) throw fileError(slice, 'stored file no longer parses', result.reason);
        const typeReason = imageTypeReason(this.#manifest, result.instance.imageType);
        if (typeReason) return { notApplicable: typeReason };
        loaded = { path: slice.path, bytes, instance: result.instance };
        this.#parsed = loaded;
      }
      let frame;
      try {
        frame = await decodeFrame(loaded.bytes, loaded.instance, slice.frame);
      } catch (err) {
        throw fileError(slice, `frame ${slice.frame} does not decode`, err instanceof Error ? err.message : 'decoder failure');
      }
      if (frame.samplesPerPixel !== 1) throw fileError(slice, 'not greyscale', `${frame.samplesPerPixel} samples per pixel`);
      // Stored values (<= 24 bits) are exact in float32; set() converts natively, and the
      // rescale to modality values (PS3.3 C.11.1) happens inside the normalisation pass.
      if (this.#stored.length !== frame.pixels.length) this.#stored = new Float32Array(frame.pixels.length);
      this.#stored.set(frame.pixels);
      preprocessSlice(
        {
          values: this.#stored,
          rows: frame.rows,
          columns: frame.columns,
          modality: this.#modality,
          rescale: { slope: loaded.instance.rescaleSlope, intercept: loaded.instance.rescaleIntercept },
        },
        this.#manifest.input,
        data.subarray(i * plane, (i + 1) * plane),
      );
      sizes.push({ rows: frame.rows, columns: frame.columns });
    }
    return { input: { data, dims: [batch.length, 1, height, width] }, sizes };
  }
}

/** A batch handed to the inference worker, not yet decoded. */
type InFlight = { outputs: Promise<Record<string, Tensor>>; sizes: ImageSize[]; done: number };

export async function runAnalysis(
  session: InferenceSession,
  manifest: Manifest,
  scan: EngineScan,
  options: { batchSize: number },
  hooks: EngineHooks = {},
): Promise<EngineResult> {
  const reason = notApplicableReason(manifest, scan);
  if (reason) return { kind: 'not_applicable', reason };

  const slices = scan.sliceList;
  const total = slices.length;
  const batchSize = Math.max(1, options.batchSize);
  const timings: EngineTimings = { readMs: 0, preprocessMs: 0, inferenceMs: 0, decodeMs: 0 };
  const perSlice: Detection[][] = [];
  const loader = new BatchLoader(manifest, scan.modality);

  /** Waits for a batch's outputs and decodes them; false: stop (cancel, shutdown, job taken). */
  const settle = async (flight: InFlight): Promise<boolean> => {
    let t = performance.now();
    const outputs = await flight.outputs;
    timings.inferenceMs += performance.now() - t;
    t = performance.now();
    decodeOutputs(outputs, manifest, flight.sizes).forEach((list, i) => {
      const size = flight.sizes[i] as ImageSize;
      perSlice.push(list.map((d) => ({ ...d, box: clampBox(d.box, size) })));
    });
    timings.decodeMs += performance.now() - t;
    return !hooks.onProgress || hooks.onProgress(flight.done, total);
  };

  let inFlight: InFlight | null = null;
  const abandon = (): void => {
    // Its result no longer matters, but a rejection must not go unhandled.
    inFlight?.outputs.catch(() => undefined);
  };
  try {
    let pending = readFiles(slices.slice(0, batchSize));
    for (let start = 0; start < total; start += batchSize) {
      if (hooks.signal?.aborted) return { kind: 'stopped' };
      const batch = slices.slice(start, start + batchSize);
      let t = performance.now();
      const files = await pending;
      // Read ahead: the next batch's files load on the thread pool meanwhile.
      if (start + batchSize < total) pending = readFiles(slices.slice(start + batchSize, start + 2 * batchSize));
      timings.readMs += performance.now() - t;

      t = performance.now();
      const prepared = await loader.load(batch, files);
      timings.preprocessMs += performance.now() - t;
      if ('notApplicable' in prepared) return { kind: 'not_applicable', reason: prepared.notApplicable };

      if (inFlight) {
        const previous: InFlight = inFlight;
        inFlight = null;
        if (!(await settle(previous))) return { kind: 'stopped' };
      }
      hooks.onInput?.(prepared.input);
      // The input's buffer is transferred to the worker: this thread no longer touches it.
      const outputs = session.run({ [manifest.input.tensor]: prepared.input });
      inFlight = { outputs, sizes: prepared.sizes, done: Math.min(start + batchSize, total) };
    }
    if (inFlight) {
      const last: InFlight = inFlight;
      inFlight = null;
      if (!(await settle(last))) return { kind: 'stopped' };
    }
  } finally {
    abandon();
  }

  const t = performance.now();
  const aggregated = aggregateFindings(perSlice, manifest.output.aggregation);
  const findings: FindingInput[] = aggregated
    .filter((f) => f.box.width > 0 && f.box.height > 0)
    .map((f) => {
      const slice = slices[f.slice_index] as EngineSlice;
      return {
        label: f.label,
        confidence: Math.min(1, Math.max(0, f.confidence)),
        x: f.box.x,
        y: f.box.y,
        width: f.box.width,
        height: f.box.height,
        instanceUid: slice.instanceUid,
        frame: slice.frame,
      };
    });
  timings.decodeMs += performance.now() - t;
  return {
    kind: 'succeeded',
    findings,
    recommendation: recommend(findings, manifest.recommendations),
    thresholds: thresholdsOf(manifest),
    slices: total,
    timings,
  };
}
