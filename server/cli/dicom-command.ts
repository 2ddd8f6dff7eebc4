/**
 * `mia dicom echo|send|find|move`: mia as a DICOM requestor against a peer named on the command
 * line (--host, --port, --aec its AE title, --aet mia's), or by --peer NAME among the data
 * folder's DICOM peers. Exit 0 when everything asked for
 * happened, 1 when the peer refused part of it (files not stored, sub-operations failed).
 */
import { resolve } from 'node:path';
import { z } from 'zod';
import { formatTable } from '#server/cli/table.ts';
import { MiaError } from '#server/errors.ts';
import { listSourceFiles } from '#server/imports/sources.ts';
import { STATUS } from '#server/dimse/command-set.ts';
import { isValidAeTitle } from '#server/dimse/pdu.ts';
import { DimseError, dicomEcho, dicomFind, dicomMove, dicomStore, isMoveSuccess, type DimsePeer, type FindLevel, type FindRecord } from '#server/dimse/scu.ts';

export type DicomIo = { out(line: string): void; err(line: string): void };

const fail = (message: string): never => {
  throw new MiaError('invalid', message);
};

const LEVELS = ['PATIENT', 'STUDY', 'SERIES'] as const;

function addressedPeer(values: Record<string, unknown>): DimsePeer {
  const host = typeof values['host'] === 'string' ? values['host'] : fail('dicom: --host of the peer is required');
  const port = z.coerce.number().int().min(1).max(65535).safeParse(values['port']);
  if (!port.success) fail('dicom: --port of the peer is required (1-65535)');
  const calledAeTitle = typeof values['aec'] === 'string' ? values['aec'] : fail("dicom: --aec, the peer's AE title, is required");
  const callingAeTitle = typeof values['aet'] === 'string' ? values['aet'] : 'MIA';
  for (const [flag, title] of [['--aec', calledAeTitle], ['--aet', callingAeTitle]] as const) {
    if (!isValidAeTitle(title)) fail(`${flag} ${title}: an AE title is 1-16 printable characters, no backslash`);
  }
  return { host, port: port.data ?? 0, calledAeTitle, callingAeTitle };
}

const optional = (values: Record<string, unknown>, name: string): string | undefined => (typeof values[name] === 'string' ? values[name] : undefined);

function findRows(records: readonly FindRecord[]): { headers: string[]; rows: string[][] } {
  const first = records[0];
  if (!first || first.level === 'STUDY') {
    return {
      headers: ['STUDY UID', 'DATE', 'ACCESSION', 'MODALITIES', 'PATIENT ID', 'PATIENT', 'DESCRIPTION', 'SERIES', 'INSTANCES'],
      rows: records.flatMap((r) =>
        r.level === 'STUDY' ? [[r.studyInstanceUid, r.studyDate, r.accessionNumber, r.modalities.join(','), r.patientId, r.patientName, r.description, String(r.series ?? ''), String(r.instances ?? '')]] : [],
      ),
    };
  }
  if (first.level === 'PATIENT') {
    return {
      headers: ['PATIENT ID', 'PATIENT', 'BIRTH DATE', 'SEX', 'STUDIES'],
      rows: records.flatMap((r) => (r.level === 'PATIENT' ? [[r.patientId, r.patientName, r.birthDate, r.sex, String(r.studies ?? '')]] : [])),
    };
  }
  return {
    headers: ['SERIES UID', 'STUDY UID', 'MODALITY', 'NUMBER', 'DESCRIPTION', 'INSTANCES'],
    rows: records.flatMap((r) =>
      r.level === 'SERIES' ? [[r.seriesInstanceUid, r.studyInstanceUid, r.modality, String(r.seriesNumber ?? ''), r.description, String(r.instances ?? '')]] : [],
    ),
  };
}

/** A DICOM node peer of the data folder by id or name, called as `callingAeTitle`. */
export type PeerResolver = (ref: string, callingAeTitle: string) => Promise<DimsePeer>;

async function run(sub: string | undefined, args: readonly string[], values: Record<string, unknown>, io: DicomIo, resolvePeer?: PeerResolver): Promise<number> {
  const peerOf = async (v: Record<string, unknown>): Promise<DimsePeer> => {
    const ref = optional(v, 'peer');
    if (ref === undefined || !resolvePeer) return addressedPeer(v);
    if (v['host'] !== undefined || v['port'] !== undefined || v['aec'] !== undefined) fail('dicom: give --peer or --host/--port/--aec, not both');
    const callingAeTitle = optional(v, 'aet') ?? 'MIA';
    if (!isValidAeTitle(callingAeTitle)) fail(`--aet ${callingAeTitle}: an AE title is 1-16 printable characters, no backslash`);
    return await resolvePeer(ref, callingAeTitle);
  };
  switch (sub) {
    case 'echo': {
      const peer = await peerOf(values);
      await dicomEcho(peer);
      io.out(`${peer.calledAeTitle} at ${peer.host}:${peer.port} answered C-ECHO`);
      return 0;
    }
    case 'send': {
      const peer = await peerOf(values);
      if (args.length === 0) fail('dicom send needs at least one file or folder');
      const listing = await listSourceFiles(args.map((p) => resolve(p)));
      if (listing.missing.length > 0) fail(`no file or folder at ${listing.missing.join(', ')}`);
      if (listing.unusable.length > 0) fail(`neither a file nor a folder: ${listing.unusable.join(', ')}`);
      let stored = 0;
      const results = await dicomStore(peer, listing.files, (r) => {
        if (r.outcome === 'stored') stored += 1;
        else io.err(`${r.file}: ${r.outcome === 'failed' ? 'not stored' : 'not sent'}: ${r.reason}`);
      });
      io.out(`${stored} of ${results.length} files stored on ${peer.calledAeTitle}`);
      return stored === results.length ? 0 : 1;
    }
    case 'find': {
      const peer = await peerOf(values);
      const level = z.enum(LEVELS).safeParse((optional(values, 'level') ?? 'STUDY').toUpperCase());
      if (!level.success) fail(`--level must be one of ${LEVELS.join(', ')}`);
      const query = {
        level: level.data as FindLevel,
        patientId: optional(values, 'patient-id'),
        patientName: optional(values, 'patient-name'),
        studyInstanceUid: optional(values, 'study-uid'),
        accessionNumber: optional(values, 'accession'),
        studyDate: optional(values, 'study-date'),
        modality: optional(values, 'modality'),
      };
      const { records, truncated } = await dicomFind(peer, query);
      const { headers, rows } = findRows(records);
      io.out(formatTable(headers, rows));
      io.err(`${records.length} ${query.level.toLowerCase()} record(s)${truncated ? ' (more matched; narrow the query)' : ''}`);
      return 0;
    }
    case 'move': {
      const peer = await peerOf(values);
      const destination = optional(values, 'dest') ?? fail('dicom move needs --dest, the AE title to move to');
      if (!isValidAeTitle(destination)) fail(`--dest ${destination}: not an AE title`);
      const series = optional(values, 'series');
      const study = optional(values, 'study');
      const patient = optional(values, 'patient');
      if (!series && !study && !patient) fail('dicom move needs --study UID, --series UID (with --study) or --patient ID');
      if (series && !study) fail('--series needs --study: a study-root move names the study of the series');
      const level: FindLevel = series ? 'SERIES' : study ? 'STUDY' : 'PATIENT';
      const report = await dicomMove(peer, { level, studyInstanceUid: study, seriesInstanceUid: series, patientId: patient, destination });
      io.out(`moved to ${destination}: ${report.completed} completed, ${report.failed} failed, ${report.warning} warning (status 0x${report.status.toString(16).padStart(4, '0')})`);
      if (report.status === STATUS.moveDestinationUnknown) io.err(`mia: ${peer.calledAeTitle} does not know the destination ${destination} (add it as a DICOM node there)`);
      if (report.errorComment) io.err(report.errorComment);
      return isMoveSuccess(report) ? 0 : 1;
    }
    default:
      return fail('dicom: expected echo, send, find or move');
  }
}

export async function dicomCommand(sub: string | undefined, args: readonly string[], values: Record<string, unknown>, io: DicomIo, resolvePeer?: PeerResolver): Promise<number> {
  try {
    return await run(sub, args, values, io, resolvePeer);
  } catch (err) {
    if (err instanceof DimseError) {
      io.err(`mia: ${err.message}`);
      return 1;
    }
    throw err;
  }
}
