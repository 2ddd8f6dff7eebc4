/**
 * `mia dicomweb find|pull`: mia as a DICOMweb client of a remote server, named by --peer (a
 * DICOMweb peer of this data folder, with its stored Authorization) or by --url with optional
 * --header lines. find prints QIDO-RS matches; pull retrieves a study (or one --series) into the
 * data folder's archive through the import pipeline. Exit 1 when a pulled instance was refused.
 */
import { systemClock } from '#server/clock.ts';
import { formatTable } from '#server/cli/table.ts';
import { createRuntime } from '#server/runtime.ts';
import { firstValue, pullFromRemote, searchRemote, type DicomWebRemote, type SearchLevel } from '#server/dicomweb/client.ts';
import { recordAudit } from '#server/audit/audit.ts';
import type { DicomJson } from '#server/dicomweb/qido.ts';
import { MiaError } from '#server/errors.ts';
import { dicomWebPeer } from '#server/peers/peers.ts';
import type { Database } from '#server/store/database.ts';

export type DicomWebIo = { out(line: string): void; err(line: string): void };
export type Place = { dataDir: string; databaseUrl: string | null };

const fail = (message: string): never => {
  throw new MiaError('invalid', message);
};

/** Filters of `find` as command-line flags, named as QIDO-RS attributes. */
const FILTER_FLAGS: ReadonlyArray<readonly [string, string]> = [
  ['patient-id', 'PatientID'],
  ['patient-name', 'PatientName'],
  ['study-uid', 'StudyInstanceUID'],
  ['accession', 'AccessionNumber'],
  ['study-date', 'StudyDate'],
  ['modality', 'ModalitiesInStudy'],
];

function headersOf(values: Record<string, unknown>): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of (values['header'] as string[] | undefined) ?? []) {
    const colon = line.indexOf(':');
    if (colon <= 0) fail(`--header '${line.slice(0, 40)}': expected 'Name: value'`);
    const name = line.slice(0, colon).trim();
    if (!/^[A-Za-z0-9-]{1,64}$/.test(name)) fail(`--header: '${name.slice(0, 40)}' is not a header name`);
    headers[name] = line.slice(colon + 1).trim();
  }
  return headers;
}

async function remoteOf(values: Record<string, unknown>, db: Database): Promise<DicomWebRemote> {
  const peer = typeof values['peer'] === 'string' ? values['peer'] : undefined;
  const url = typeof values['url'] === 'string' ? values['url'] : undefined;
  if (peer && url) fail('dicomweb: give --peer or --url, not both');
  if (peer) {
    const found = await dicomWebPeer({ db, clock: systemClock }, peer);
    return { url: found.url, headers: found.headers };
  }
  if (!url) fail('dicomweb: --url of the DICOMweb root (e.g. http://pacs:8042/dicom-web) or --peer NAME is required');
  return { url: url ?? '', headers: headersOf(values) };
}

function studyRows(items: readonly DicomJson[]): string[][] {
  return items.map((s) => [
    firstValue(s, '0020000D'),
    firstValue(s, '00080020'),
    firstValue(s, '00080050'),
    ((s['00080061']?.Value as unknown[] | undefined) ?? []).join(','),
    firstValue(s, '00100020'),
    firstValue(s, '00100010'),
    firstValue(s, '00201206'),
    firstValue(s, '00201208'),
  ]);
}

export async function dicomwebCommand(sub: string | undefined, values: Record<string, unknown>, place: Place, io: DicomWebIo): Promise<number> {
  if (sub !== 'find' && sub !== 'pull') return fail('dicomweb: expected find or pull');
  const runtime = await createRuntime({ logToStderr: false, databaseUrl: place.databaseUrl, clock: systemClock, dataDir: place.dataDir }, { background: false });
  try {
    const remote = await remoteOf(values, runtime.db);
    if (sub === 'find') {
      const study = typeof values['study'] === 'string' ? values['study'] : undefined;
      const filters: Record<string, string> = {};
      for (const [flag, attribute] of FILTER_FLAGS) if (typeof values[flag] === 'string') filters[attribute] = values[flag];
      const level: SearchLevel = study ? 'series' : 'studies';
      const items = await searchRemote(remote, level, study ? {} : filters, study ? { studyUid: study } : undefined);
      if (level === 'studies') {
        io.out(formatTable(['STUDY UID', 'DATE', 'ACCESSION', 'MODALITIES', 'PATIENT ID', 'PATIENT', 'SERIES', 'INSTANCES'], studyRows(items)));
      } else {
        io.out(formatTable(['SERIES UID', 'MODALITY', 'NUMBER', 'DESCRIPTION', 'INSTANCES'], items.map((s) => [
          firstValue(s, '0020000E'), firstValue(s, '00080060'), firstValue(s, '00200011'), firstValue(s, '0008103E'), firstValue(s, '00201209'),
        ])));
      }
      io.err(`${items.length} ${level === 'studies' ? 'stud(ies)' : 'series'}`);
      return 0;
    }
    const studyUid = typeof values['study'] === 'string' ? values['study'] : fail('dicomweb pull needs --study UID');
    const seriesUid = typeof values['series'] === 'string' ? values['series'] : undefined;
    const result = await pullFromRemote(runtime, remote, { studyUid, seriesUid }, 'cli');
    await recordAudit(runtime.db, {
      at: systemClock.now().toISOString(),
      request_id: null,
      key_id: 'cli',
      user_id: 'cli',
      // The same action as POST /v1/dicom/retrieve, which pulls through this client too.
      action: 'dicom.retrieve',
      target: `study:${studyUid}`,
      patient_id: null,
      outcome: 'success',
      status_code: null,
    });
    for (const problem of result.problems) io.err(problem);
    const c = result.counts;
    io.out(`pulled ${result.series} series: ${c.imported} imported, ${c.duplicates} already here, ${c.conflicts} conflicts, ${c.rejected} rejected (jobs ${result.jobs.join(', ')})`);
    return c.rejected + c.conflicts > 0 ? 1 : 0;
  } finally {
    await runtime.stop();
  }
}
