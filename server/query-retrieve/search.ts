/**
 * Searching a peer with one set of typed filters: a DICOM node by C-FIND (patient root at
 * patient level, study root below), a DICOMweb server by QIDO-RS. At most `limit` results come
 * back, and `capped` says when more matched (the peer was asked for one more than the limit; a
 * C-FIND beyond it is cancelled).
 */
import type { QueryBody, QueryFilters, QueryResult, QueryResultItem } from '#server/api/query-retrieve-schemas.ts';
import { searchRemote, type DicomWebRemote } from '#server/dicomweb/client.ts';
import type { DicomJson } from '#server/dicomweb/qido.ts';
import { dicomFind, type DimsePeer, type FindRecord } from '#server/dimse/scu.ts';
import { studiesInArchive } from '#server/store/retrieves.ts';
import { peerFailure, resolveSource, type SourceDeps } from '#server/query-retrieve/sources.ts';

/** YYYY-MM-DD to a DICOM DA range (PS3.4 C.2.2.2.5): "from-to", "from-" or "-to". */
export function dateRange(from: string | undefined, to: string | undefined): string | undefined {
  if (from === undefined && to === undefined) return undefined;
  const da = (d: string | undefined): string => (d ?? '').replaceAll('-', '');
  return from === to ? da(from) : `${da(from)}-${da(to)}`;
}

// ---------------------------------------------------------------- DIMSE

function fromFind(record: FindRecord): QueryResultItem {
  switch (record.level) {
    case 'PATIENT':
      return { level: 'patient', patient_id: record.patientId, patient_name: record.patientName, birth_date: record.birthDate, sex: record.sex, studies: record.studies };
    case 'STUDY':
      return {
        level: 'study',
        study_uid: record.studyInstanceUid,
        study_date: record.studyDate,
        study_time: record.studyTime,
        accession_number: record.accessionNumber,
        description: record.description,
        modalities: record.modalities,
        patient_id: record.patientId,
        patient_name: record.patientName,
        series_count: record.series,
        instance_count: record.instances,
        in_archive: false,
      };
    case 'SERIES':
      return {
        level: 'series',
        study_uid: record.studyInstanceUid,
        series_uid: record.seriesInstanceUid,
        modality: record.modality,
        series_number: record.seriesNumber,
        description: record.description,
        instance_count: record.instances,
      };
  }
}

const FIND_LEVEL = { patient: 'PATIENT', study: 'STUDY', series: 'SERIES' } as const;

type Found = { items: QueryResultItem[]; capped: boolean };

export async function findOnNode(node: DimsePeer, level: QueryBody['level'], filters: QueryFilters, limit: number): Promise<Found> {
  const { records } = await dicomFind(node, {
    level: FIND_LEVEL[level],
    patientId: filters.patient_id,
    patientName: filters.patient_name,
    studyInstanceUid: filters.study_uid,
    accessionNumber: filters.accession,
    studyDate: dateRange(filters.study_date_from, filters.study_date_to),
    modality: filters.modality,
    limit: limit + 1,
  });
  return { items: records.slice(0, limit).map(fromFind), capped: records.length > limit };
}

// ---------------------------------------------------------------- DICOMweb

const T = {
  patientName: '00100010',
  patientId: '00100020',
  birthDate: '00100030',
  sex: '00100040',
  studyUid: '0020000D',
  seriesUid: '0020000E',
  studyDate: '00080020',
  studyTime: '00080030',
  accession: '00080050',
  studyDescription: '00081030',
  modalitiesInStudy: '00080061',
  modality: '00080060',
  seriesNumber: '00200011',
  seriesDescription: '0008103E',
  studySeries: '00201206',
  studyInstances: '00201208',
  seriesInstances: '00201209',
} as const;

/** Every value of an attribute as text: a PN's alphabetic form, numbers as written. */
function texts(item: DicomJson, tag: string): string[] {
  return (item[tag]?.Value ?? []).flatMap((value): string[] => {
    if (value === null || value === undefined) return [];
    if (typeof value === 'object') return 'Alphabetic' in value ? [String((value as { Alphabetic?: unknown }).Alphabetic ?? '')] : [];
    return [String(value)];
  });
}
const text = (item: DicomJson, tag: string): string => texts(item, tag)[0] ?? '';
const count = (item: DicomJson, tag: string): number | null => {
  const n = Number(text(item, tag));
  return text(item, tag) !== '' && Number.isSafeInteger(n) && n >= 0 ? n : null;
};

function studyFromJson(item: DicomJson): Extract<QueryResultItem, { level: 'study' }> {
  return {
    level: 'study',
    study_uid: text(item, T.studyUid),
    study_date: text(item, T.studyDate),
    study_time: text(item, T.studyTime),
    accession_number: text(item, T.accession),
    description: text(item, T.studyDescription),
    modalities: texts(item, T.modalitiesInStudy),
    patient_id: text(item, T.patientId),
    patient_name: text(item, T.patientName),
    series_count: count(item, T.studySeries),
    instance_count: count(item, T.studyInstances),
    in_archive: false,
  };
}

function seriesFromJson(item: DicomJson, studyUid: string): Extract<QueryResultItem, { level: 'series' }> {
  return {
    level: 'series',
    study_uid: text(item, T.studyUid) || studyUid,
    series_uid: text(item, T.seriesUid),
    modality: text(item, T.modality),
    series_number: count(item, T.seriesNumber),
    description: text(item, T.seriesDescription),
    instance_count: count(item, T.seriesInstances),
  };
}

/** The QIDO-RS query parameters of the filters (PS3.18 10.6.1.2). */
function qidoFilters(filters: QueryFilters, limit: number): Record<string, string> {
  const q: Record<string, string> = { limit: String(limit + 1) };
  if (filters.patient_name !== undefined) q['PatientName'] = filters.patient_name;
  if (filters.patient_id !== undefined) q['PatientID'] = filters.patient_id;
  if (filters.accession !== undefined) q['AccessionNumber'] = filters.accession;
  if (filters.study_uid !== undefined) q['StudyInstanceUID'] = filters.study_uid;
  const dates = dateRange(filters.study_date_from, filters.study_date_to);
  if (dates !== undefined) q['StudyDate'] = dates;
  return q;
}

export async function searchWeb(remote: DicomWebRemote, level: QueryBody['level'], filters: QueryFilters, limit: number): Promise<Found> {
  if (level === 'series') {
    const studyUid = filters.study_uid ?? '';
    const q: Record<string, string> = { limit: String(limit + 1), includefield: 'SeriesDescription' };
    if (filters.modality !== undefined) q['Modality'] = filters.modality;
    const series = await searchRemote(remote, 'series', q, { studyUid });
    return { items: series.slice(0, limit).map((item) => seriesFromJson(item, studyUid)), capped: series.length > limit };
  }
  const q = qidoFilters(filters, limit);
  if (filters.modality !== undefined) q['ModalitiesInStudy'] = filters.modality;
  q['includefield'] = 'StudyDescription';
  const found = await searchRemote(remote, 'studies', q);
  const capped = found.length > limit;
  if (level === 'study') return { items: found.slice(0, limit).map(studyFromJson), capped };
  // QIDO-RS has no patient level: the patients of the matching studies, with how many matched.
  const patients = new Map<string, Extract<QueryResultItem, { level: 'patient' }>>();
  for (const item of found.slice(0, limit)) {
    const id = text(item, T.patientId);
    const known = patients.get(id);
    if (known) known.studies = (known.studies ?? 0) + 1;
    else patients.set(id, { level: 'patient', patient_id: id, patient_name: text(item, T.patientName), birth_date: text(item, T.birthDate), sex: text(item, T.sex), studies: 1 });
  }
  return { items: [...patients.values()], capped };
}

// ---------------------------------------------------------------- both

export async function searchPeer(deps: SourceDeps, body: QueryBody): Promise<QueryResult> {
  const source = await resolveSource(deps, body.peer);
  let found: Found;
  try {
    found = source.kind === 'dimse' ? await findOnNode(source.node, body.level, body.filters, body.limit) : await searchWeb(source.remote, body.level, body.filters, body.limit);
  } catch (err) {
    throw peerFailure(source, err);
  }
  const { items, capped } = found;
  const local = await studiesInArchive(deps.db, items.flatMap((i) => (i.level === 'study' ? [i.study_uid] : [])));
  for (const item of items) if (item.level === 'study') item.in_archive = local.has(item.study_uid);
  return { source: source.info, level: body.level, items, capped, limit: body.limit };
}
