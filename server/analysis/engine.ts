/**
 * One analysis of one scan with one model: stored files -> decoded pixels -> modality values ->
 * model input (preprocess.ts, the training-time definition) -> batched session.run -> boxes
 * (decode.ts, per-label thresholds, NMS) -> findings across slices (aggregate.ts) -> the
 * recommendation (recommend.ts). Batches are bounded (config.analysisBatchSize) so memory stays
 * flat on long series; the next batch's files are read while the current one runs.
 */
import { readFile } from 'node:fs/promises';
import type * as ort from 'onnxruntime-node';
import { Tensor as OrtTensor } from 'onnxruntime-node';
import { aggregateFindings } from '#server/analysis/aggregate.ts';
import { imageTypeReason, notApplicableReason, type ScanFacts } from '#server/analysis/applicability.ts';
import { clampBox, decodeOutputs, type ImageSize, type Tensor } from '#server/analysis/decode.ts';
import type { Manifest } from '#server/analysis/manifest.ts';
import type { Detection } from '#server/analysis/nms.ts';
import { preprocessSlice, type InputBatch } from '#server/analysis/preprocess.ts';
import { recommend } from '#server/analysis/recommend.ts';
import { thresholdsOf } from '#server/analysis/registry.ts';
import { parseDicom, type DicomInstance } from '#server/dicom/parse.ts';
import { decodeFrame, type PixelArray } from '#server/dicom/pixels.ts';
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

/** Modality values (PS3.3 C.11.1: stored * slope + intercept; HU for CT) as float32. */
function modalityValues(pixels: PixelArray, slope: number, intercept: number): Float32Array {
  // set() converts natively; indexing the PixelArray union in a JS loop is polymorphic and
  // costs ~1 ms a 256x256 slice, more than inference. Stored values (<= 24 bits) are exact in
  // float32, so rescaling afterwards rounds the same as rescaling first.
  const out = new Float32Array(pixels.length);
  out.set(pixels);
  if (slope !== 1 || intercept !== 0) {
    for (let i = 0; i < out.length; i++) out[i] = (out[i] as number) * slope + intercept;
  }
  return out;
}

function toTensors(results: ort.InferenceSession.OnnxValueMapType): Record<string, Tensor> {
  const outputs: Record<string, Tensor> = {};
  for (const [name, value] of Object.entries(results)) {
    const data = (value as ort.Tensor).data;
    if (!(data instanceof Float32Array)) throw new MiaError('internal', `model output ${name} is not float32`);
    outputs[name] = { data, dims: (value as ort.Tensor).dims };
  }
  return outputs;
}

export async function runAnalysis(
  session: ort.InferenceSession,
  manifest: Manifest,
  scan: EngineScan,
  options: { batchSize: number },
  hooks: EngineHooks = {},
): Promise<EngineResult> {
  const reason = notApplicableReason(manifest, scan);
  if (reason) return { kind: 'not_applicable', reason };

  const slices = scan.sliceList;
  const total = slices.length;
  const { height, width } = manifest.input.size;
  const plane = height * width;
  const batchSize = Math.max(1, options.batchSize);
  const timings: EngineTimings = { readMs: 0, preprocessMs: 0, inferenceMs: 0, decodeMs: 0 };
  const perSlice: Detection[][] = [];
  const parsed = new Map<string, LoadedFile>();

  let pending = readFiles(slices.slice(0, batchSize));
  for (let start = 0; start < total; start += batchSize) {
    if (hooks.signal?.aborted) return { kind: 'stopped' };
    const batch = slices.slice(start, start + batchSize);
    let t = performance.now();
    const files = await pending;
    // Read ahead: the next batch's files load on the thread pool while this one is computed.
    if (start + batchSize < total) pending = readFiles(slices.slice(start + batchSize, start + 2 * batchSize));
    timings.readMs += performance.now() - t;

    t = performance.now();
    const data = new Float32Array(batch.length * plane);
    const sizes: ImageSize[] = [];
    for (const [i, slice] of batch.entries()) {
      let loaded = parsed.get(slice.path);
      if (!loaded) {
        const bytes = files.get(slice.path);
        if (bytes === undefined || bytes instanceof Error) throw fileError(slice, 'stored file unreadable', bytes?.message ?? 'missing');
        const result = parseDicom(bytes);
        if (!result.ok) throw fileError(slice, 'stored file no longer parses', result.reason);
        const typeReason = imageTypeReason(manifest, result.instance.imageType);
        if (typeReason) return { kind: 'not_applicable', reason: typeReason };
        loaded = { bytes, instance: result.instance };
        parsed.clear();
        parsed.set(slice.path, loaded);
      }
      let frame;
      try {
        frame = await decodeFrame(loaded.bytes, loaded.instance, slice.frame);
      } catch (err) {
        throw fileError(slice, `frame ${slice.frame} does not decode`, err instanceof Error ? err.message : 'decoder failure');
      }
      if (frame.samplesPerPixel !== 1) throw fileError(slice, 'not greyscale', `${frame.samplesPerPixel} samples per pixel`);
      const values = modalityValues(frame.pixels, loaded.instance.rescaleSlope, loaded.instance.rescaleIntercept);
      preprocessSlice(
        { values, rows: frame.rows, columns: frame.columns, modality: scan.modality },
        manifest.input,
        data.subarray(i * plane, (i + 1) * plane),
      );
      sizes.push({ rows: frame.rows, columns: frame.columns });
    }
    const input: InputBatch = { data, dims: [batch.length, 1, height, width] };
    hooks.onInput?.(input);
    timings.preprocessMs += performance.now() - t;

    t = performance.now();
    const results = await session.run({ [manifest.input.tensor]: new OrtTensor('float32', input.data, input.dims) });
    timings.inferenceMs += performance.now() - t;

    t = performance.now();
    const detections = decodeOutputs(toTensors(results), manifest, sizes);
    detections.forEach((list, i) => {
      const size = sizes[i] as ImageSize;
      perSlice.push(list.map((d) => ({ ...d, box: clampBox(d.box, size) })));
    });
    timings.decodeMs += performance.now() - t;

    const done = Math.min(start + batchSize, total);
    if (hooks.onProgress && !hooks.onProgress(done, total)) return { kind: 'stopped' };
    // Let requests in between batches: session.run holds the event loop while it computes.
    await new Promise<void>((resolve) => setImmediate(resolve));
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
