/**
 * One file in, one outcome out: read, parse, hash, copy into the archive (`prepareFile`), then
 * make a batch of prepared files visible in one transaction (`commitBatch`). Preparing never
 * touches the index; committing never touches the disk; so a crash between the two leaves only
 * unreferenced archive files.
 */
import { routeEvent } from '#server/routing/rules.ts';
import { mapInOrder } from '#server/in-order.ts';
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FrameValue } from '#server/api/import-schemas.ts';
import { dataSetStart, readDicom, type DicomInstance, type FrameValues } from '#server/dicom/parse.ts';
import { describeTransferSyntax, findTransferSyntax } from '#server/dicom/transfer-syntax.ts';
import { archivePathFor, type ArchiveWriter } from '#server/imports/archive.ts';
import { countScanInstances, insertInstance, insertUncountedInstance, upsertPatient, upsertScan, upsertStudy, type InstanceInput } from '#server/store/archive-index.ts';
import type { Database } from '#server/store/database.ts';
import { addImportJobProgress, insertImportReject, type ImportJobRow, type JobCountsDelta } from '#server/store/import-jobs.ts';
import { encodeSpacing, findStoredDigest } from '#server/store/instances.ts';
import { recordChanges, type LocalChange, type Replica } from '#server/sync/replica.ts';

export type FileOutcome =
  | { outcome: 'imported'; path: string; sop_instance_uid: string; scan_id: string; bytes: number }
  | { outcome: 'duplicate'; path: string; sop_instance_uid: string; scan_id: string | null; bytes: number }
  | { outcome: 'conflict'; path: string; sop_instance_uid: string; reason: string; bytes: number }
  | { outcome: 'rejected'; path: string; reason: string; bytes: number };

export type Prepared =
  | { kind: 'done'; result: FileOutcome }
  | { kind: 'store'; path: string; instance: DicomInstance; sha256: string; archivePath: string; bytes: number };

/** A file to import: `path` is what the job record shows, `file` where the bytes are. */
/**
 * `synced`: the file is a spooled copy (an upload) on the data folder's file system, owned by the
 * caller, whose fsync is under way: a stored one is renamed into the archive, not copied.
 */
export type ImportFile = { path: string; file: string; synced?: Promise<void> | undefined };

const rejected = (path: string, reason: string, bytes = 0): Prepared => ({ kind: 'done', result: { outcome: 'rejected', path, reason, bytes } });

function conflictReason(sop: string): string {
  return `SOP Instance UID ${sop} is already stored with different content; kept the first`;
}

function readError(err: unknown): string {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
  if (code === 'ENOENT') return 'file disappeared before it could be read';
  if (code === 'EACCES' || code === 'EPERM') return 'file is not readable (permission denied)';
  if (code === 'EISDIR') return 'is a folder, not a file';
  if (code === 'ERR_FS_FILE_TOO_LARGE') return 'file is larger than 2 GiB, the most mia reads as one DICOM file';
  return `file could not be read${code ? ` (${code})` : ''}`;
}

/**
 * Reads and writes are synchronous on purpose: small ones hit the page cache and cost less than
 * a thread pool round trip each; the slow part (fsync) happens in `ArchiveWriter.flush`, in
 * parallel. Only a deflated data set waits, for its inflating off the event loop.
 */
export async function prepareFile(db: Database, archive: ArchiveWriter, source: ImportFile): Promise<Prepared> {
  return await readAndPlace(db, archive, source, (bytes, sha256) => archive.stage(bytes, sha256));
}

/**
 * `prepareFile` for a file already written on the data folder's file system (an upload spooled to
 * `stagingTempPath` or its own folder): the same checks, then the file itself is staged (renamed
 * into place at the flush), never copied.
 * Whatever the outcome, the caller still owns `source.file` until the archive is flushed.
 * `synced`: the writer's fsync of the file, when it started one as the file ended.
 */
export async function prepareStagedFile(db: Database, archive: ArchiveWriter, source: ImportFile, synced?: Promise<void>): Promise<Prepared> {
  return await readAndPlace(db, archive, source, (_bytes, sha256) => archive.adopt(source.file, sha256, synced));
}

/** Read, check, and (for a file to store) put it in the archive the way `place` says. */
async function readAndPlace(db: Database, archive: ArchiveWriter, source: ImportFile, place: (bytes: Buffer, sha256: string) => string): Promise<Prepared> {
  let bytes: Buffer;
  try {
    bytes = readFileSync(source.file);
  } catch (err) {
    return rejected(source.path, readError(err));
  }
  const checked = await inspect(db, archive.dataDir, source.path, bytes);
  if (checked.kind === 'done') return checked;
  return { ...checked, archivePath: place(bytes, checked.sha256) };
}

/**
 * A file already in the archive under its digest (a blob a workstation uploaded to the hub, or
 * one pulled from it): checked and read like any import, and refused if its content is not the
 * digest it is stored under.
 */
export async function prepareArchived(db: Database, dataDir: string, sha256: string, path: string): Promise<Prepared> {
  const archivePath = archivePathFor(sha256);
  let bytes: Buffer;
  try {
    bytes = readFileSync(join(dataDir, archivePath));
  } catch (err) {
    return rejected(path, readError(err));
  }
  const checked = await inspect(db, dataDir, path, bytes);
  if (checked.kind === 'done') return checked;
  if (checked.sha256 !== sha256) return rejected(path, `stored file does not match its digest ${sha256}`, bytes.byteLength);
  return { ...checked, archivePath };
}

/** Whether the stored file under `storedSha` holds the same data set bytes as `bytes`. */
function sameDataSet(dataDir: string, storedSha: string, bytes: Buffer): boolean {
  let stored: Buffer;
  try {
    stored = readFileSync(join(dataDir, archivePathFor(storedSha)));
  } catch {
    return false;
  }
  const a = dataSetStart(stored);
  const b = dataSetStart(bytes);
  return a !== null && b !== null && stored.subarray(a).equals(bytes.subarray(b));
}

/** A file checked and not yet placed in the archive: an outcome already, or one to store. */
export type Inspected = Extract<Prepared, { kind: 'done' }> | Omit<Extract<Prepared, { kind: 'store' }>, 'archivePath'>;

/**
 * Parse, reject rules, digest and the duplicate check: everything but placing the file.
 * `sha256`: the digest of `bytes` when the caller already has it (a C-STORE's intake record).
 */
export async function inspect(db: Database, dataDir: string, path: string, bytes: Buffer, sha256?: string): Promise<Inspected> {
  const size = bytes.byteLength;
  if (size === 0) return rejected(path, 'empty file', 0);
  const parsed = await readDicom(new Uint8Array(bytes.buffer, bytes.byteOffset, size));
  if (!parsed.ok) return rejected(path, parsed.reason, size);
  const instance = parsed.instance;
  // mia archives images for reading and analysis; SR, RT plans, waveforms have nothing to show.
  if (!instance.hasPixelData) return rejected(path, 'no pixel data (not an image)', size);
  const syntax = findTransferSyntax(instance.transferSyntaxUid);
  if (!syntax || syntax.encoding === 'unsupported') {
    return rejected(path, `unsupported transfer syntax ${describeTransferSyntax(instance.transferSyntaxUid)}`, size);
  }
  const digest = sha256 ?? createHash('sha256').update(bytes).digest('hex');
  const sop = instance.sopInstanceUid;
  const stored = await findStoredDigest(db, sop);
  if (stored === digest) {
    return { kind: 'done', result: { outcome: 'duplicate', path, sop_instance_uid: sop, scan_id: instance.seriesInstanceUid, bytes: size } };
  }
  if (stored !== undefined) {
    // The same instance by another route (C-MOVE after WADO-RS, a PACS re-sending it) carries
    // another file header; what was stored is the same, so it is a duplicate, not a conflict.
    if (sameDataSet(dataDir, stored, bytes)) {
      return { kind: 'done', result: { outcome: 'duplicate', path, sop_instance_uid: sop, scan_id: instance.seriesInstanceUid, bytes: size } };
    }
    return { kind: 'done', result: { outcome: 'conflict', path, sop_instance_uid: sop, reason: conflictReason(sop), bytes: size } };
  }
  return { kind: 'store', path, instance, sha256: digest, bytes: size };
}

const orNull = (text: string): string | null => (text.trim() === '' ? null : text.trim());

/**
 * Where a slice lies along its series: Image Position (Patient) projected on the slice normal,
 * the cross product of the row and column direction cosines (PS3.3 C.7.6.2.1.1).
 */
export function slicePosition(instance: Pick<DicomInstance, 'imagePositionPatient' | 'imageOrientationPatient'>): number | null {
  const p = instance.imagePositionPatient;
  if (!p) return null;
  const o = instance.imageOrientationPatient;
  if (!o) return p[2];
  const [r0, r1, r2, c0, c1, c2] = o;
  const n = [r1 * c2 - r2 * c1, r2 * c0 - r0 * c2, r0 * c1 - r1 * c0] as const;
  return p[0] * n[0] + p[1] * n[1] + p[2] * n[2];
}

/**
 * Each frame's own values of an Enhanced multi-frame image (functional groups), as the API lists
 * them; null when every frame has frame 0's values, which the instance fields already hold.
 */
function frameValuesJson(i: DicomInstance): string | null {
  if (i.frames.length < 2) return null;
  const values = i.frames.map((f) => JSON.stringify(frameValue(f)));
  return values.every((v) => v === values[0]) ? null : `[${values.join(',')}]`;
}

function frameValue(f: FrameValues): FrameValue {
  return {
    position: slicePosition(f),
    image_position: f.imagePositionPatient,
    // A frame may lie in its own plane (Plane Orientation per frame, PS3.3 C.7.6.16.2.4): the
    // viewer's orientation markers follow it.
    image_orientation: f.imageOrientationPatient,
    pixel_spacing: f.pixelSpacing,
    rescale_slope: f.rescaleSlope,
    rescale_intercept: f.rescaleIntercept,
    window_center: f.windowCenter[0] ?? null,
    window_width: f.windowWidth[0] ?? null,
  };
}

export type RefCache = Map<string, number>;

/**
 * Instances indexed per scan and not yet added to its count; given to `indexInstance`, the
 * caller adds them (`countScanInstances`) before its transaction commits.
 */
export type PendingCounts = Map<number, number>;

export async function indexInstance(db: Database, p: Extract<Prepared, { kind: 'store' }>, refs: RefCache, at: string, pending?: PendingCounts): Promise<boolean> {
  const i = p.instance;
  // An empty Patient ID (Type 2, PS3.3 C.7.1.1) still needs a patient row to hang the study on.
  const patientId = i.patientId.trim() || 'UNKNOWN';
  const patientKey = `p:${patientId}`;
  let patientRef = refs.get(patientKey);
  if (patientRef === undefined) {
    patientRef = await upsertPatient(db, { patientId, name: orNull(i.patientName), birthDate: orNull(i.patientBirthDate), sex: orNull(i.patientSex) }, at);
    refs.set(patientKey, patientRef);
  }
  const studyKey = `s:${i.studyInstanceUid}`;
  let studyRef = refs.get(studyKey);
  if (studyRef === undefined) {
    studyRef = await upsertStudy(
      db,
      patientRef,
      {
        studyUid: i.studyInstanceUid,
        studyDate: orNull(i.studyDate),
        studyTime: orNull(i.studyTime),
        description: orNull(i.studyDescription),
        accessionNumber: orNull(i.accessionNumber),
      },
      at,
    );
    refs.set(studyKey, studyRef);
  }
  const scanKey = `c:${i.seriesInstanceUid}`;
  let scanRef = refs.get(scanKey);
  if (scanRef === undefined) {
    scanRef = await upsertScan(
      db,
      studyRef,
      {
        scanId: i.seriesInstanceUid,
        // Modality is Type 1, but secondary captures in the wild leave it empty: OT is "other".
        modality: i.modality.trim() || 'OT',
        bodyPart: orNull(i.bodyPart),
        description: orNull(i.seriesDescription),
        seriesNumber: i.seriesNumber !== null && Number.isInteger(i.seriesNumber) ? i.seriesNumber : null,
      },
      at,
    );
    refs.set(scanKey, scanRef);
  }
  const input: InstanceInput = {
    sopInstanceUid: i.sopInstanceUid,
    sopClassUid: i.sopClassUid,
    transferSyntax: i.transferSyntaxUid,
    rows: i.rows,
    columns: i.columns,
    frames: i.numberOfFrames,
    instanceNumber: i.instanceNumber !== null && Number.isInteger(i.instanceNumber) ? i.instanceNumber : null,
    position: slicePosition(i),
    pixelSpacing: encodeSpacing(i.pixelSpacing, i.pixelSpacingSource),
    filePath: p.archivePath,
    fileSha256: p.sha256,
    fileSize: p.bytes,
    imaging: {
      samplesPerPixel: i.samplesPerPixel,
      photometric: i.photometricInterpretation,
      bitsAllocated: i.bitsAllocated,
      bitsStored: i.bitsStored,
      pixelRepresentation: i.pixelRepresentation,
      rescaleSlope: i.rescaleSlope,
      rescaleIntercept: i.rescaleIntercept,
      windowCenter: i.windowCenter[0] ?? null,
      windowWidth: i.windowWidth[0] ?? null,
      imagePosition: i.imagePositionPatient ? JSON.stringify(i.imagePositionPatient) : null,
      imageOrientation: i.imageOrientationPatient ? JSON.stringify(i.imageOrientationPatient) : null,
      frameValues: frameValuesJson(i),
      framesProblem: i.functionalGroupsProblem,
    },
  };
  if (!pending) return await insertInstance(db, scanRef, input, at);
  if (!(await insertUncountedInstance(db, scanRef, input, at))) return false;
  pending.set(scanRef, (pending.get(scanRef) ?? 0) + 1);
  return true;
}

/**
 * The change an imported instance records for sync: the file is the instance (its metadata is
 * read from it again wherever it arrives, by the same parser and reject rules), named by its SOP
 * Instance UID and its content's SHA-256, which the receiver checks the file against.
 */
function instanceChange(p: Extract<Prepared, { kind: 'store' }>): LocalChange {
  const i = p.instance;
  return {
    entity: 'instance',
    key: i.sopInstanceUid,
    op: 'put',
    userId: null,
    payload: { sha256: p.sha256, size: p.bytes, series_uid: i.seriesInstanceUid, study_uid: i.studyInstanceUid },
  };
}

/**
 * Makes one batch visible: instances, rejects, the job's counts and its checkpoint, all in one
 * transaction. The archive files of the batch must already be durable (flushDirectories).
 *
 * Read committed on a hub: every statement here stands on its own (patients, studies and series
 * are upserts that do nothing when present, an instance already stored is told apart by its
 * digest, counts are added to), and uploads to one series from many clients and nodes all add
 * to its instance count; serializable would fail most of them and run them again.
 */
export async function commitBatch(
  db: Database,
  replica: Replica,
  jobRef: number,
  batch: readonly Prepared[],
  at: string,
): Promise<{ outcomes: FileOutcome[]; job: ImportJobRow | undefined }> {
  return await db.transaction(async (tx) => {
    const refs: RefCache = new Map();
    // A batch is mostly one or two series: one count update each instead of one per instance.
    const pending: PendingCounts = new Map();
    const delta: JobCountsDelta = { filesSeen: 0, imported: 0, duplicates: 0, conflicts: 0, rejected: 0, bytes: 0 };
    const outcomes = await mapInOrder(batch, async (p): Promise<FileOutcome> => {
      if (p.kind === 'done') return p.result;
      const sop = p.instance.sopInstanceUid;
      if (await indexInstance(tx, p, refs, at, pending)) {
        return { outcome: 'imported', path: p.path, sop_instance_uid: sop, scan_id: p.instance.seriesInstanceUid, bytes: p.bytes };
      }
      // Lost a race (same batch, or another process importing the same files): decide now.
      if (await findStoredDigest(tx, sop) === p.sha256) {
        return { outcome: 'duplicate', path: p.path, sop_instance_uid: sop, scan_id: p.instance.seriesInstanceUid, bytes: p.bytes };
      }
      return { outcome: 'conflict', path: p.path, sop_instance_uid: sop, reason: conflictReason(sop), bytes: p.bytes };
    });
    // In id order, so two hub nodes committing batches of the same series lock scans alike.
    for (const [scanRef, added] of [...pending].sort((a, b) => a[0] - b[0])) await countScanInstances(tx, scanRef, added, at);
    await recordChanges(tx, replica, batch.flatMap((p, i) => (p.kind === 'store' && outcomes[i]?.outcome === 'imported' ? [instanceChange(p)] : [])));
    // Routing rules on instance.received: their send jobs commit with the instances they forward.
    const received = batch.flatMap((p, i) => (p.kind === 'store' && outcomes[i]?.outcome === 'imported' ? [{ sopInstanceUid: p.instance.sopInstanceUid, modality: p.instance.modality.trim() || 'OT' }] : []));
    await routeEvent(tx, { event: 'instance.received', instances: received }, at);
    for (const o of outcomes) {
      delta.filesSeen += 1;
      delta.bytes += o.bytes;
      if (o.outcome === 'imported') delta.imported += 1;
      else if (o.outcome === 'duplicate') delta.duplicates += 1;
      else if (o.outcome === 'conflict') {
        delta.conflicts += 1;
        await insertImportReject(tx, jobRef, { outcome: 'conflict', path: o.path, reason: o.reason, sopInstanceUid: o.sop_instance_uid });
      } else {
        delta.rejected += 1;
        await insertImportReject(tx, jobRef, { outcome: 'rejected', path: o.path, reason: o.reason, sopInstanceUid: null });
      }
    }
    return { outcomes, job: await addImportJobProgress(tx, jobRef, delta, batch.length, at) };
  }, { durable: true, isolation: 'read committed' });
}
