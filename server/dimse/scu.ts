/**
 * mia as a DIMSE requestor (SCU): C-ECHO, C-STORE of files as they are (no transcoding), C-FIND
 * at patient, study and series level, and C-MOVE (a study, series or patient to a destination
 * AE, usually mia's own SCP). Used by `mia dicom`, routing and the "search PACS" screen.
 */
import { open } from 'node:fs/promises';
import { EXPLICIT_VR_LITTLE_ENDIAN, IMPLICIT_VR_LITTLE_ENDIAN } from '#server/dicom/transfer-syntax.ts';
import { DimseError, expectResponse, openAssociation, type Association, type DimsePeer } from '#server/dimse/association.ts';
import { fragmentSize, type PduChannel } from '#server/dimse/channel.ts';
import { COMMAND, isPending, NO_DATA_SET, STATUS } from '#server/dimse/command-set.ts';
import { encodeIdentifier, readTopLevel, stringValues, TAG, type IdentifierElement } from '#server/dimse/identifier.ts';
import { encodePData, MAX_PRESENTATION_CONTEXTS, type ProposedContext } from '#server/dimse/pdu.ts';
import { readFileMeta, type FileMeta } from '#server/dimse/part10.ts';
import { QUERY_RETRIEVE, VERIFICATION } from '#server/dimse/sop-classes.ts';

export { DimseError, type DimsePeer } from '#server/dimse/association.ts';

const LITTLE_ENDIAN = [EXPLICIT_VR_LITTLE_ENDIAN, IMPLICIT_VR_LITTLE_ENDIAN];
/** Medium priority (PS3.7 9.1.1.1.7). */
const MEDIUM = 0x0000;

const statusHex = (status: number | undefined): string => `0x${(status ?? 0).toString(16).padStart(4, '0')}`;

async function withAssociation<T>(peer: DimsePeer, contexts: ProposedContext[], work: (a: Association) => Promise<T>): Promise<T> {
  const association = await openAssociation(peer, contexts);
  try {
    const result = await work(association);
    await association.release();
    return result;
  } catch (err) {
    association.abort();
    throw err;
  }
}

/** C-ECHO: resolves when the peer answered with success. */
export async function dicomEcho(peer: DimsePeer): Promise<void> {
  await withAssociation(peer, [{ id: 1, abstractSyntax: VERIFICATION, transferSyntaxes: LITTLE_ENDIAN }], async (a) => {
    if (a.accepted.length === 0) throw new DimseError('refused', `${peer.calledAeTitle} does not accept Verification`);
    await a.send(1, { commandField: COMMAND.cEchoRq, messageId: 1, affectedSopClassUid: VERIFICATION, dataSetType: NO_DATA_SET });
    const rsp = expectResponse(await a.next(), COMMAND.cEchoRsp, 1);
    if (rsp.status !== STATUS.success) throw new DimseError('refused', `C-ECHO answered with status ${statusHex(rsp.status)}`);
  });
}

// ---------------------------------------------------------------- C-STORE

export type StoreFileResult =
  | { file: string; outcome: 'stored'; sopInstanceUid: string; status: number }
  | { file: string; outcome: 'failed'; sopInstanceUid: string | null; status: number | null; reason: string }
  /** Not sent: not a Part 10 file, or its SOP class and syntax were not accepted. */
  | { file: string; outcome: 'not-sent'; sopInstanceUid: string | null; reason: string };

/** Warnings (PS3.4 B.2.3: 0001, Bxxx) still mean the instance was stored. */
const isStoreSuccess = (status: number): boolean => status === STATUS.success || status === 0x0001 || (status & 0xf000) === 0xb000;

/** The data set part of a file, in PDVs no larger than the peer accepts, read a fragment at a time. */
async function streamDataSet(channel: PduChannel, peerMaxPdu: number, contextId: number, path: string, meta: FileMeta): Promise<void> {
  const size = fragmentSize(peerMaxPdu);
  const handle = await open(path, 'r');
  try {
    const buffer = Buffer.allocUnsafe(size);
    let at = meta.dataSetOffset;
    do {
      const { bytesRead } = await handle.read(buffer, 0, Math.min(size, meta.size - at), at);
      if (bytesRead === 0 && at < meta.size) throw new DimseError('protocol', `${path} shrank while it was being sent`);
      at += bytesRead;
      await channel.send(encodePData([{ contextId, command: false, last: at >= meta.size, data: buffer.subarray(0, bytesRead) }]));
    } while (at < meta.size);
  } finally {
    await handle.close();
  }
}

/**
 * Sends the files on one association, each in its own transfer syntax: a file whose class and
 * syntax the peer did not accept is reported, not transcoded. At most 128 class/syntax pairs fit
 * in one association (PS3.8); files beyond them are reported as not sent.
 */
export async function dicomStore(peer: DimsePeer, files: readonly string[], onFile?: (result: StoreFileResult) => void): Promise<StoreFileResult[]> {
  const results: StoreFileResult[] = [];
  const report = (r: StoreFileResult): void => {
    results.push(r);
    onFile?.(r);
  };
  const readable: Array<{ file: string; meta: FileMeta }> = [];
  for (const file of files) {
    try {
      const meta = await readFileMeta(file);
      if (meta.ok) readable.push({ file, meta: meta.meta });
      else report({ file, outcome: 'not-sent', sopInstanceUid: null, reason: meta.reason });
    } catch (err) {
      report({ file, outcome: 'not-sent', sopInstanceUid: null, reason: `cannot read (${(err as NodeJS.ErrnoException).code ?? 'error'})` });
    }
  }
  if (readable.length === 0) return results;

  const contexts: ProposedContext[] = [];
  const key = (sopClass: string, syntax: string): string => `${sopClass}|${syntax}`;
  const seen = new Set<string>();
  const propose = (abstractSyntax: string, transferSyntaxes: string[]): void => {
    const k = key(abstractSyntax, transferSyntaxes.join(','));
    if (seen.has(k) || contexts.length >= MAX_PRESENTATION_CONTEXTS) return;
    seen.add(k);
    contexts.push({ id: contexts.length * 2 + 1, abstractSyntax, transferSyntaxes });
  };
  // One context per class and syntax, each proposing that syntax alone: a context proposing
  // Explicit and Implicit VR Little Endian together gets one of them accepted, and the files in
  // the other would have none (no transcoding here).
  for (const { meta } of readable) propose(meta.sopClassUid, [meta.transferSyntaxUid]);

  await withAssociation(peer, contexts, async (a) => {
    const contextFor = new Map<string, number>();
    for (const c of a.accepted) if (!contextFor.has(key(c.abstractSyntax, c.transferSyntax))) contextFor.set(key(c.abstractSyntax, c.transferSyntax), c.id);
    let messageId = 0;
    for (const { file, meta } of readable) {
      const contextId = contextFor.get(key(meta.sopClassUid, meta.transferSyntaxUid));
      if (contextId === undefined) {
        report({ file, outcome: 'not-sent', sopInstanceUid: meta.sopInstanceUid, reason: `${peer.calledAeTitle} did not accept SOP class ${meta.sopClassUid} in transfer syntax ${meta.transferSyntaxUid}` });
        continue;
      }
      messageId = (messageId % 0xffff) + 1;
      const command = {
        commandField: COMMAND.cStoreRq,
        messageId,
        affectedSopClassUid: meta.sopClassUid,
        affectedSopInstanceUid: meta.sopInstanceUid,
        priority: MEDIUM,
        dataSetType: 0x0000,
      };
      await a.sendWith(contextId, command, (channel, peerMaxPdu) => streamDataSet(channel, peerMaxPdu, contextId, file, meta));
      const rsp = expectResponse(await a.next(), COMMAND.cStoreRsp, messageId);
      const status = rsp.status ?? 0xffff;
      if (isStoreSuccess(status)) report({ file, outcome: 'stored', sopInstanceUid: meta.sopInstanceUid, status });
      else report({ file, outcome: 'failed', sopInstanceUid: meta.sopInstanceUid, status, reason: `status ${statusHex(status)}${rsp.errorComment ? `: ${rsp.errorComment}` : ''}` });
    }
  });
  return results;
}

// ---------------------------------------------------------------- C-FIND

export type FindLevel = 'PATIENT' | 'STUDY' | 'SERIES';
export type InformationModel = 'study-root' | 'patient-root';

/** Matching keys; empty ones are left out. Wildcards (*, ?) and date ranges pass as written. */
export type FindQuery = {
  level: FindLevel;
  /** Study root by default; patient level needs patient root. */
  model?: InformationModel | undefined;
  patientId?: string | undefined;
  patientName?: string | undefined;
  studyInstanceUid?: string | undefined;
  accessionNumber?: string | undefined;
  studyDate?: string | undefined;
  modality?: string | undefined;
  /** At most this many records are kept (default 1,000); the rest is cancelled. */
  limit?: number | undefined;
};

export type PatientRecord = { level: 'PATIENT'; patientId: string; patientName: string; birthDate: string; sex: string; studies: number | null };
export type StudyRecord = {
  level: 'STUDY';
  studyInstanceUid: string;
  studyDate: string;
  studyTime: string;
  accessionNumber: string;
  description: string;
  modalities: string[];
  patientId: string;
  patientName: string;
  series: number | null;
  instances: number | null;
};
export type SeriesRecord = {
  level: 'SERIES';
  studyInstanceUid: string;
  seriesInstanceUid: string;
  modality: string;
  seriesNumber: number | null;
  description: string;
  instances: number | null;
};
export type FindRecord = PatientRecord | StudyRecord | SeriesRecord;
export type FindResult = { records: FindRecord[]; truncated: boolean };

export const DEFAULT_FIND_LIMIT = 1000;
export const MAX_FIND_LIMIT = 100_000;

function findElements(query: FindQuery): IdentifierElement[] {
  const e = (tag: number, vr: string, value = ''): IdentifierElement => ({ tag, vr, value });
  const elements: IdentifierElement[] = [
    e(TAG.specificCharacterSet, 'CS', 'ISO_IR 192'),
    e(TAG.queryRetrieveLevel, 'CS', query.level),
    e(TAG.patientId, 'LO', query.patientId),
    e(TAG.patientName, 'PN', query.patientName),
  ];
  if (query.level === 'PATIENT') {
    elements.push(e(TAG.patientBirthDate, 'DA'), e(TAG.patientSex, 'CS'), e(TAG.numberOfPatientRelatedStudies, 'IS'));
  } else {
    elements.push(e(TAG.studyInstanceUid, 'UI', query.studyInstanceUid), e(TAG.studyDate, 'DA', query.studyDate), e(TAG.accessionNumber, 'SH', query.accessionNumber));
  }
  if (query.level === 'STUDY') {
    elements.push(
      e(TAG.studyTime, 'TM'),
      e(TAG.studyDescription, 'LO'),
      e(TAG.modalitiesInStudy, 'CS', query.modality),
      e(TAG.numberOfStudyRelatedSeries, 'IS'),
      e(TAG.numberOfStudyRelatedInstances, 'IS'),
    );
  }
  if (query.level === 'SERIES') {
    elements.push(
      e(TAG.seriesInstanceUid, 'UI'),
      e(TAG.modality, 'CS', query.modality),
      e(TAG.seriesNumber, 'IS'),
      e(TAG.seriesDescription, 'LO'),
      e(TAG.numberOfSeriesRelatedInstances, 'IS'),
    );
  }
  return elements;
}

const count = (text: string): number | null => (/^\s*\d+\s*$/.test(text) ? Number(text) : null);

function record(level: FindLevel, bytes: Buffer, transferSyntax: string): FindRecord {
  const v = stringValues(readTopLevel(bytes, transferSyntax));
  switch (level) {
    case 'PATIENT':
      return { level, patientId: v(TAG.patientId), patientName: v(TAG.patientName), birthDate: v(TAG.patientBirthDate), sex: v(TAG.patientSex), studies: count(v(TAG.numberOfPatientRelatedStudies)) };
    case 'STUDY':
      return {
        level,
        studyInstanceUid: v(TAG.studyInstanceUid),
        studyDate: v(TAG.studyDate),
        studyTime: v(TAG.studyTime),
        accessionNumber: v(TAG.accessionNumber),
        description: v(TAG.studyDescription),
        modalities: v(TAG.modalitiesInStudy).split('\\').filter(Boolean),
        patientId: v(TAG.patientId),
        patientName: v(TAG.patientName),
        series: count(v(TAG.numberOfStudyRelatedSeries)),
        instances: count(v(TAG.numberOfStudyRelatedInstances)),
      };
    case 'SERIES':
      return {
        level,
        studyInstanceUid: v(TAG.studyInstanceUid),
        seriesInstanceUid: v(TAG.seriesInstanceUid),
        modality: v(TAG.modality),
        seriesNumber: count(v(TAG.seriesNumber)),
        description: v(TAG.seriesDescription),
        instances: count(v(TAG.numberOfSeriesRelatedInstances)),
      };
  }
}

function modelOf(level: FindLevel, model: InformationModel | undefined): InformationModel {
  // Study root has no patient level (PS3.4 C.6.2).
  return level === 'PATIENT' ? 'patient-root' : (model ?? 'study-root');
}

export async function dicomFind(peer: DimsePeer, query: FindQuery): Promise<FindResult> {
  const limit = Math.min(Math.max(1, query.limit ?? DEFAULT_FIND_LIMIT), MAX_FIND_LIMIT);
  const sopClass = modelOf(query.level, query.model) === 'patient-root' ? QUERY_RETRIEVE.patientRootFind : QUERY_RETRIEVE.studyRootFind;
  return await withAssociation(peer, [{ id: 1, abstractSyntax: sopClass, transferSyntaxes: LITTLE_ENDIAN }], async (a) => {
    const context = a.accepted[0];
    if (!context) throw new DimseError('refused', `${peer.calledAeTitle} does not accept C-FIND (${sopClass})`);
    const messageId = 1;
    await a.send(
      context.id,
      { commandField: COMMAND.cFindRq, messageId, affectedSopClassUid: sopClass, priority: MEDIUM, dataSetType: 0x0000 },
      encodeIdentifier(findElements(query), context.transferSyntax),
    );
    const records: FindRecord[] = [];
    let truncated = false;
    for (;;) {
      const message = await a.next();
      const rsp = expectResponse(message, COMMAND.cFindRsp, messageId);
      if (!isPending(rsp.status)) {
        if (rsp.status !== STATUS.success && rsp.status !== STATUS.cancel) {
          throw new DimseError('refused', `C-FIND answered with status ${statusHex(rsp.status)}${rsp.errorComment ? `: ${rsp.errorComment}` : ''}`);
        }
        return { records, truncated };
      }
      if (truncated) continue;
      if (message.data) records.push(record(query.level, message.data.bytes(), context.transferSyntax));
      if (records.length >= limit) {
        // Enough: the peer stops sending matches and answers Cancel (PS3.4 C.4.1.3.2).
        truncated = true;
        await a.send(context.id, { commandField: COMMAND.cCancelRq, messageIdBeingRespondedTo: messageId, dataSetType: NO_DATA_SET });
      }
    }
  });
}

// ---------------------------------------------------------------- C-MOVE

export type MoveQuery = {
  level: FindLevel;
  model?: InformationModel | undefined;
  patientId?: string | undefined;
  studyInstanceUid?: string | undefined;
  seriesInstanceUid?: string | undefined;
  /** The AE title the peer sends the instances to (it must know it). */
  destination: string;
};

export type MoveReport = { status: number; completed: number; failed: number; warning: number; remaining: number; errorComment: string | null };

export async function dicomMove(peer: DimsePeer, query: MoveQuery, onProgress?: (report: MoveReport) => void): Promise<MoveReport> {
  const sopClass = modelOf(query.level, query.model) === 'patient-root' ? QUERY_RETRIEVE.patientRootMove : QUERY_RETRIEVE.studyRootMove;
  const identifier: IdentifierElement[] = [{ tag: TAG.queryRetrieveLevel, vr: 'CS', value: query.level }];
  if (query.patientId !== undefined) identifier.push({ tag: TAG.patientId, vr: 'LO', value: query.patientId });
  if (query.studyInstanceUid !== undefined) identifier.push({ tag: TAG.studyInstanceUid, vr: 'UI', value: query.studyInstanceUid });
  if (query.seriesInstanceUid !== undefined) identifier.push({ tag: TAG.seriesInstanceUid, vr: 'UI', value: query.seriesInstanceUid });
  return await withAssociation(peer, [{ id: 1, abstractSyntax: sopClass, transferSyntaxes: LITTLE_ENDIAN }], async (a) => {
    const context = a.accepted[0];
    if (!context) throw new DimseError('refused', `${peer.calledAeTitle} does not accept C-MOVE (${sopClass})`);
    const messageId = 1;
    await a.send(
      context.id,
      { commandField: COMMAND.cMoveRq, messageId, affectedSopClassUid: sopClass, priority: MEDIUM, moveDestination: query.destination, dataSetType: 0x0000 },
      encodeIdentifier(identifier, context.transferSyntax),
    );
    for (;;) {
      const rsp = expectResponse(await a.next(), COMMAND.cMoveRsp, messageId);
      const report: MoveReport = {
        status: rsp.status ?? 0xffff,
        completed: rsp.completed ?? 0,
        failed: rsp.failed ?? 0,
        warning: rsp.warning ?? 0,
        remaining: rsp.remaining ?? 0,
        errorComment: rsp.errorComment ?? null,
      };
      if (isPending(rsp.status)) {
        onProgress?.(report);
        continue;
      }
      return report;
    }
  });
}

/** Final C-MOVE statuses that mean every sub-operation succeeded. */
export const isMoveSuccess = (report: MoveReport): boolean => report.status === STATUS.success && report.failed === 0;
