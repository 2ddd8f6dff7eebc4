/**
 * One analysis of one scan with one model: stored files -> decoded pixels -> modality values ->
 * model input (preprocess.ts, the training-time definition) -> batched session.run -> boxes
 * (decode.ts, per-label thresholds, NMS) -> findings across slices (aggregate.ts) -> the
 * recommendation (recommend.ts). Batches are bounded (config.analysisBatchSize) so memory stays
 * flat on long series. The stages overlap: this thread reads, decodes and preprocesses the next
 * batches while the inference worker runs the current one.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { aggregateForOutput, decodeThresholdsFor, localizationOf } from '#server/analysis/aggregate.ts';
import { calibratorOf, rawThresholdsOf } from '#server/analysis/calibration.ts';
import { imageTypeReason, notApplicableReason, type ScanFacts } from '#server/analysis/applicability.ts';
import { clampBox, decodeOutputs, type ImageSize } from '#server/analysis/decode.ts';
import type { Manifest } from '#server/analysis/manifest.ts';
import type { Detection } from '#server/analysis/nms.ts';
import { decodeSegmentation, SegmentationPlanes, type Region } from '#server/analysis/segmentation.ts';
import { preprocessSlice, type InputBatch, type SliceValues } from '#server/analysis/preprocess.ts';
import { recommend } from '#server/analysis/recommend.ts';
import { decisionOf } from '#server/analysis/operating-points.ts';
import type { InferenceSession, InputArea, RunResult } from '#server/analysis/worker-session.ts';
import { frameValues, readDicom, type DicomInstance } from '#server/dicom/parse.ts';
import { decodeFrame, type PixelArray } from '#server/dicom/pixels.ts';
import { MiaError } from '#server/errors.ts';
import { slicePosition } from '#server/imports/ingest.ts';
import type { FindingInput } from '#server/store/analyses.ts';

/** One slice of the scan in slice order: a frame of a stored instance. */
export type EngineSlice = { instanceUid: string; frame: number; path: string };

export type EngineScan = ScanFacts & { sliceList: readonly EngineSlice[] };

export type EngineHooks = {
  /** After each batch; returning false stops the run (cancel, shutdown, job taken over). */
  onProgress?: (done: number, total: number) => boolean | Promise<boolean>;
  signal?: AbortSignal | undefined;
  /** Sees each model input batch (the benchmark replays them through bare session.run). */
  onInput?: (batch: InputBatch) => void;
};

/**
 * Time this thread spent in each stage; inferenceMs is waiting for results not hidden behind
 * preprocessing. workerRunMs is the inference worker's session.run time, summed over batches:
 * against a bare run of the same batches it shows what running beside this thread costs.
 */
export type EngineTimings = { readMs: number; preprocessMs: number; inferenceMs: number; decodeMs: number; workerRunMs: number };

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

/**
 * Reads stored files into one buffer, reused from file to file: a fresh 128 KB buffer per slice
 * (readFileSync) measured 100-300 us against 35-60 us. Safe because a slice is decoded and
 * preprocessed before the next file is read: native pixels are decoded as a view on the buffer
 * ('view' storage), and other decoders return pixels of their own.
 * Synchronous on purpose: a stored slice is a page-cache read, while a thread-pool read must
 * wait for a core that inference and preprocessing keep busy (measured: 40-60 ms lost per 100
 * slices on 2 cores).
 */
class StoredFileReader {
  #buffer = new Uint8Array(0);

  read(slice: EngineSlice): Uint8Array {
    let fd: number | null = null;
    try {
      fd = openSync(slice.path, 'r');
      const size = fstatSync(fd).size;
      if (this.#buffer.length < size) this.#buffer = new Uint8Array(size);
      let done = 0;
      while (done < size) {
        const n = readSync(fd, this.#buffer, done, size - done, done);
        if (n === 0) break;
        done += n;
      }
      // A new view per file: caches keyed by the bytes (deflated data sets) never see a stale one.
      return this.#buffer.subarray(0, done);
    } catch (err) {
      throw fileError(slice, 'stored file unreadable', err instanceof Error ? err.message : 'unreadable');
    } finally {
      if (fd !== null) closeSync(fd);
    }
  }
}

function frameRescale(instance: DicomInstance, frame: number): { slope: number; intercept: number } {
  const v = frameValues(instance, frame);
  return { slope: v.rescaleSlope, intercept: v.rescaleIntercept };
}

/**
 * spacings: each slice's pixel spacing (row, column mm), for a segmentation model's
 * min_region_mm2. The input lives in `area` until the batch's outputs are read.
 */
type PreparedBatch = { input: InputBatch; area: InputArea; sizes: ImageSize[]; spacings: ({ row: number; column: number } | null)[] };

/** Stored files of one batch -> its model input; a file the model cannot take ends the run. */
class BatchLoader {
  readonly #manifest: Manifest;
  readonly #modality: string;
  readonly #session: InferenceSession;
  /** The last parsed file: a multi-frame instance is parsed once for all its frames. */
  #parsed: (LoadedFile & { path: string }) | null = null;
  #stored = new Float32Array(0);
  readonly #reader = new StoredFileReader();
  /** Time spent reading stored files, part of load(). */
  readMs = 0;

  constructor(session: InferenceSession, manifest: Manifest, modality: string) {
    this.#session = session;
    this.#manifest = manifest;
    this.#modality = modality;
  }

  /**
   * 8/16-bit integers as decoded (preprocessing indexes a lookup table with them); wider ones
   * as float32 (exact up to 24 bits; set() converts natively). The rescale to modality values
   * (PS3.3 C.11.1) happens inside the normalisation pass either way.
   */
  #sliceValues(pixels: PixelArray): SliceValues {
    if (pixels instanceof Int8Array || pixels instanceof Uint8Array || pixels instanceof Int16Array || pixels instanceof Uint16Array) return pixels;
    if (pixels instanceof Float32Array) return pixels;
    if (this.#stored.length !== pixels.length) this.#stored = new Float32Array(pixels.length);
    this.#stored.set(pixels);
    return this.#stored;
  }

  async load(batch: readonly EngineSlice[]): Promise<PreparedBatch | { notApplicable: string }> {
    const { height, width } = this.#manifest.input.size;
    const area = this.#session.inputArea(batch.length * height * width);
    let handedOver = false;
    try {
      const prepared = await this.#fill(batch, area);
      handedOver = !('notApplicable' in prepared);
      return prepared;
    } finally {
      if (!handedOver) area.release();
    }
  }

  async #fill(batch: readonly EngineSlice[], area: InputArea): Promise<PreparedBatch | { notApplicable: string }> {
    const { height, width } = this.#manifest.input.size;
    const plane = height * width;
    const data = area.data;
    const sizes: ImageSize[] = [];
    const spacings: PreparedBatch['spacings'] = [];
    for (const [i, slice] of batch.entries()) {
      let loaded = this.#parsed?.path === slice.path ? this.#parsed : null;
      if (!loaded) {
        const t = performance.now();
        const bytes = this.#reader.read(slice);
        this.readMs += performance.now() - t;
        const result = await readDicom(bytes);
        if (!result.ok) throw fileError(slice, 'stored file no longer parses', result.reason);
        const typeReason = imageTypeReason(this.#manifest, result.instance.imageType);
        if (typeReason) return { notApplicable: typeReason };
        const groupsProblem = result.instance.functionalGroupsProblem;
        // Without each frame's own functional groups its rescale (and place) is unknown; a guess
        // would feed the model wrong units and report "no findings" that mean nothing.
        if (groupsProblem) return { notApplicable: `instance ${slice.instanceUid}: ${groupsProblem}, so each frame's rescale and position are unknown` };
        loaded = { path: slice.path, bytes, instance: result.instance };
        this.#parsed = loaded;
      }
      let frame;
      try {
        frame = await decodeFrame(loaded.bytes, loaded.instance, slice.frame, 'view');
      } catch (err) {
        throw fileError(slice, `frame ${slice.frame} does not decode`, err instanceof Error ? err.message : 'decoder failure');
      }
      if (frame.samplesPerPixel !== 1) throw fileError(slice, 'not greyscale', `${frame.samplesPerPixel} samples per pixel`);
      preprocessSlice(
        {
          values: this.#sliceValues(frame.pixels),
          rows: frame.rows,
          columns: frame.columns,
          modality: this.#modality,
          // Each frame's own rescale: Enhanced images may vary it per frame (PS3.3 C.7.6.16.2.9).
          rescale: frameRescale(loaded.instance, slice.frame),
        },
        this.#manifest.input,
        data.subarray(i * plane, (i + 1) * plane),
      );
      sizes.push({ rows: frame.rows, columns: frame.columns });
      const spacing = frameValues(loaded.instance, slice.frame).pixelSpacing;
      spacings.push(spacing ? { row: spacing[0], column: spacing[1] } : null);
    }
    return { input: { data, dims: [batch.length, 1, height, width] }, area, sizes, spacings };
  }
}

/** Direction cosines equal within this: the same plane as written with rounding. */
const ORIENTATION_TOLERANCE = 1e-4;

/**
 * The frames of each Enhanced multi-frame instance in the order of their Plane Position along
 * the slice normal (PS3.3 C.7.6.16.2.3): frame numbers need not follow space, and findings on
 * neighbouring slices are joined into one (aggregate.ts), so the model must see a stack in order.
 * Frames with different Plane Orientations are not one stack of parallel slices: not applicable.
 * Classic single-frame instances are ordered by the index already (by position).
 */
async function spatialOrder(slices: readonly EngineSlice[], reader: StoredFileReader): Promise<EngineSlice[] | { notApplicable: string }> {
  const out: EngineSlice[] = [];
  for (let start = 0; start < slices.length; ) {
    const first = slices[start] as EngineSlice;
    let end = start + 1;
    while (end < slices.length && slices[end]?.path === first.path) end += 1;
    const group = slices.slice(start, end);
    start = end;
    if (group.length < 2) {
      out.push(...group);
      continue;
    }
    const result = await readDicom(reader.read(first));
    // A file that no longer parses fails in the batch loader, with its reason.
    if (!result.ok || result.instance.frames.length === 0) {
      out.push(...group);
      continue;
    }
    const instance = result.instance;
    const o0 = frameValues(instance, 0).imageOrientationPatient;
    const keyed = group.map((slice) => {
      const v = frameValues(instance, slice.frame);
      return { slice, orientation: v.imageOrientationPatient, position: slicePosition(v) };
    });
    const turned = keyed.find((k) => !k.orientation !== !o0 || (k.orientation && o0 && k.orientation.some((c, i) => Math.abs(c - (o0[i] ?? 0)) > ORIENTATION_TOLERANCE)));
    if (turned) {
      return { notApplicable: `instance ${first.instanceUid}: frame ${turned.slice.frame} has another Plane Orientation (0020,9116) than frame 0, so the frames are not one stack of slices` };
    }
    if (keyed.every((k) => k.position !== null)) keyed.sort((a, b) => (a.position as number) - (b.position as number));
    out.push(...keyed.map((k) => k.slice));
  }
  return out;
}

const FIRST_BATCH = 2;
const MAX_IN_FLIGHT = 3;

/** A batch handed to the inference worker, not yet decoded. */
type InFlight = { outputs: Promise<RunResult>; area: InputArea; sizes: ImageSize[]; spacings: PreparedBatch['spacings']; done: number };

export async function runAnalysis(
  session: InferenceSession,
  manifest: Manifest,
  scan: EngineScan,
  /** thresholds: per label, on the calibrated scale (the site's operating point); the manifest's default when absent. */
  options: { batchSize: number; thresholds?: Readonly<Record<string, number>> | undefined },
  hooks: EngineHooks = {},
): Promise<EngineResult> {
  const reason = notApplicableReason(manifest, scan);
  if (reason) return { kind: 'not_applicable', reason };

  const ordered = await spatialOrder(scan.sliceList, new StoredFileReader());
  if ('notApplicable' in ordered) return { kind: 'not_applicable', reason: ordered.notApplicable };
  const slices = ordered;
  const total = slices.length;
  const batchSize = Math.max(1, options.batchSize);
  const timings: EngineTimings = { readMs: 0, preprocessMs: 0, inferenceMs: 0, decodeMs: 0, workerRunMs: 0 };
  // A segmentation model's regions are Detections with their mask and area.
  const perSlice: (Detection | Region)[][] = [];
  const planes = new SegmentationPlanes();
  const spec = manifest.output;
  const loader = new BatchLoader(session, manifest, scan.modality);
  const thresholds = { ...(options.thresholds ?? decisionOf(manifest, null).thresholds) };
  const calibrator = calibratorOf(manifest.calibration);
  // The decoder compares raw peaks: each calibrated threshold goes back to the raw scale once.
  const rawThresholds = rawThresholdsOf(calibrator, thresholds);
  const decodeAt = decodeThresholdsFor(spec, rawThresholds);

  /** Waits for a batch's outputs and decodes them; false: stop (cancel, shutdown, job taken). */
  const settle = async (flight: InFlight): Promise<boolean> => {
    let t = performance.now();
    try {
      const { outputs, runMs } = await flight.outputs;
      timings.inferenceMs += performance.now() - t;
      timings.workerRunMs += runMs;
      t = performance.now();
      if (spec.decoding === 'segmentation') {
        // Regions' boxes are their masks' bounds, inside the image already.
        perSlice.push(...decodeSegmentation(outputs, { ...manifest, output: spec }, flight.sizes, { spacings: flight.spacings, thresholds: decodeAt }, planes));
      } else {
        decodeOutputs(outputs, manifest, flight.sizes, { thresholds: decodeAt }).forEach((list, i) => {
          const size = flight.sizes[i] as ImageSize;
          perSlice.push(list.map((d) => ({ ...d, box: clampBox(d.box, size) })));
        });
      }
    } finally {
      // The outputs may be views into the area: decoded, or never to be.
      flight.area.release();
    }
    timings.decodeMs += performance.now() - t;
    return !hooks.onProgress || (await hooks.onProgress(flight.done, total));
  };

  // Up to three batches wait in the worker, so it starts the next one the moment it finishes one
  // instead of idling while this thread decodes and posts, even when this thread is held up
  // for a while (a garbage collection, an SQLite write, the host taking the core). Measured on
  // the benchmark's 100-slice jobs: with two, the worker sat idle 10-30 ms in a third of them;
  // with three, in one in ten.
  const inFlight: InFlight[] = [];
  const abandon = (): void => {
    // Their results no longer matter, but a rejection must not go unhandled, and an area is
    // reused only once the worker is done writing into it.
    for (const flight of inFlight) flight.outputs.then(flight.area.release, flight.area.release);
  };
  try {
    // Batches start small and double: nothing overlaps the first one's preprocessing, so the
    // worker starts after two slices, and each next batch is ready about when the last is done.
    for (let start = 0, size = Math.min(FIRST_BATCH, batchSize); start < total; start += size, size = Math.min(size * 2, batchSize)) {
      if (hooks.signal?.aborted) return { kind: 'stopped' };
      const batch = slices.slice(start, start + size);
      const t = performance.now();
      const readBefore = loader.readMs;
      const prepared = await loader.load(batch);
      timings.readMs += loader.readMs - readBefore;
      timings.preprocessMs += performance.now() - t - (loader.readMs - readBefore);
      if ('notApplicable' in prepared) return { kind: 'not_applicable', reason: prepared.notApplicable };

      // The input stays in its area, which this thread no longer writes until the outputs are read.
      const outputs = session.run({ [manifest.input.tensor]: prepared.input });
      inFlight.push({ outputs, area: prepared.area, sizes: prepared.sizes, spacings: prepared.spacings, done: Math.min(start + size, total) });
      hooks.onInput?.(prepared.input);
      const oldest = inFlight.length >= MAX_IN_FLIGHT ? inFlight.shift() : undefined;
      if (oldest && !(await settle(oldest))) return { kind: 'stopped' };
    }
    for (let flight = inFlight.shift(); flight; flight = inFlight.shift()) {
      if (!(await settle(flight))) return { kind: 'stopped' };
    }
  } finally {
    abandon();
  }

  const t = performance.now();
  const aggregated = aggregateForOutput(perSlice, manifest.output, rawThresholds);
  const localization = localizationOf(manifest.output);
  const findings: FindingInput[] = aggregated
    .filter((f) => f.box.width > 0 && f.box.height > 0)
    .map((f) => {
      const slice = slices[f.slice_index] as EngineSlice;
      return {
        label: f.label,
        confidence: Math.min(1, Math.max(0, calibrator.confidence(f.label, f.confidence))),
        x: f.box.x,
        y: f.box.y,
        width: f.box.width,
        height: f.box.height,
        instanceUid: slice.instanceUid,
        frame: slice.frame,
        localization,
        mask: 'mask' in f.detection ? (f.detection as Region).mask : null,
      };
    });
  timings.decodeMs += performance.now() - t;
  return {
    kind: 'succeeded',
    findings,
    recommendation: recommend(findings, manifest.recommendations, scan.modality),
    thresholds,
    slices: total,
    timings,
  };
}
