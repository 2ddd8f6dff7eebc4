/**
 * Retrieving from a peer into the local archive: a study, one series, or a patient's priors
 * (every study of a Patient ID on the peer, optionally only older than a day and of given
 * modalities). What to fetch is settled first, by a C-FIND or QIDO-RS while the caller waits
 * (so an unreachable peer is an error at once and nothing is recorded); then a record is made
 * and the runner fetches study by study in the background: by C-MOVE to mia's own AE, whose SCP
 * imports what arrives, or by WADO-RS straight into the import pipeline.
 */
import type { RetrieveBody, RetrieveRecord, RetrieveStudy } from '#server/api/query-retrieve-schemas.ts';
import { MAX_PRIOR_STUDIES } from '#server/api/query-retrieve-schemas.ts';
import { conflict, invalid, notFound } from '#server/errors.ts';
import { findIncomingPeers } from '#server/store/dicom-peers.ts';
import { findOnNode, searchWeb } from '#server/query-retrieve/search.ts';
import { peerFailure, resolveSource, type Source, type SourceDeps } from '#server/query-retrieve/sources.ts';
import type { RetrieveRunner } from '#server/query-retrieve/runner.ts';
import { parseStudies } from '#server/query-retrieve/study-list.ts';
import type { JobNode } from '#server/jobs/node.ts';
import type { PageRequest, Page } from '#server/store/page.ts';
import { findRetrieve, insertRetrieve, listRetrieveRows, type RetrieveRow, type RetrieveStatus } from '#server/store/retrieves.ts';

export type RetrieveDeps = SourceDeps & { node: JobNode };

/** Where a C-MOVE sends to: mia's own AE title (its SCP imports what arrives). */
export type Destination = { aeTitle: string; port: number | null } | null;

type Options = { before?: string | undefined; modalities?: string[] | undefined };


export function toRecord(row: RetrieveRow): RetrieveRecord {
  const options = JSON.parse(row.options) as Options;
  return {
    id: row.public_id,
    source: { id: row.peer_id, name: row.peer_name },
    method: row.method,
    target: {
      kind: row.target_kind,
      study_uid: row.study_uid,
      series_uid: row.series_uid,
      patient_id: row.patient_id,
      before: options.before ?? null,
      modalities: options.modalities ?? null,
    },
    status: row.status,
    error: row.error,
    studies: parseStudies(row.studies),
    counts: { completed: Number(row.completed), failed: Number(row.failed), warning: Number(row.warning) },
    created_by: row.created_by,
    created_at: row.created_at,
    updated_at: row.updated_at,
    finished_at: row.finished_at,
  };
}

/** The day before YYYY-MM-DD as DICOM DA: "before" excludes the day itself, a DA range does not. */
function dayBefore(date: string): string {
  const d = new Date(`${date}T00:00:00Z`);
  d.setUTCDate(d.getUTCDate() - 1);
  return d.toISOString().slice(0, 10);
}

const daToIso = (da: string): string => (/^\d{8}$/.test(da) ? `${da.slice(0, 4)}-${da.slice(4, 6)}-${da.slice(6, 8)}` : '');

function pending(study: { study_uid: string; study_date: string; description: string; modalities: string[]; instance_count: number | null }, seriesUid: string | null, expected: number | null): RetrieveStudy {
  return {
    study_uid: study.study_uid,
    series_uid: seriesUid,
    study_date: study.study_date,
    description: study.description,
    modalities: study.modalities,
    expected_instances: expected,
    status: 'pending',
    completed: 0,
    failed: 0,
    warning: 0,
    remaining: null,
    import_jobs: [],
    error: null,
  };
}

type Plan = { studies: RetrieveStudy[]; patientId: string | null; notFound: string | null };

/** The studies a retrieve covers, as the peer lists them now. */
async function plan(source: Source, body: RetrieveBody): Promise<Plan> {
  const find = async (filters: Parameters<typeof findOnNode>[2], limit: number) => {
    try {
      return source.kind === 'dimse' ? await findOnNode(source.node, 'study', filters, limit) : await searchWeb(source.remote, 'study', filters, limit);
    } catch (err) {
      throw peerFailure(source, err);
    }
  };
  if (body.priors_of_patient_id !== undefined) {
    const patientId = body.priors_of_patient_id;
    const only = body.modalities?.length === 1 ? body.modalities[0] : undefined;
    const found = await find({ patient_id: patientId, study_date_to: body.before ? dayBefore(body.before) : undefined, modality: only }, MAX_PRIOR_STUDIES);
    if (found.capped) throw invalid('Too many prior studies', `more than ${MAX_PRIOR_STUDIES} studies of this patient match on ${source.info.name}; narrow with before or modalities`);
    const studies = found.items.flatMap((item) => {
      if (item.level !== 'study' || item.patient_id !== patientId || item.study_uid === '') return [];
      // Peers differ in how they match dates and modality lists; the bounds are checked here too.
      if (body.before !== undefined && !(daToIso(item.study_date) !== '' && daToIso(item.study_date) < body.before)) return [];
      if (body.modalities !== undefined && !item.modalities.some((m) => body.modalities?.includes(m))) return [];
      return [pending(item, null, item.instance_count)];
    });
    studies.sort((a, b) => b.study_date.localeCompare(a.study_date));
    return { studies, patientId, notFound: null };
  }
  const studyUid = body.study_uid ?? '';
  const found = await find({ study_uid: studyUid }, 1);
  const study = found.items.find((item) => item.level === 'study' && item.study_uid === studyUid);
  if (!study || study.level !== 'study') return { studies: [], patientId: null, notFound: `study ${studyUid} is not on ${source.info.name}` };
  const seriesUid = body.series_uid ?? null;
  if (seriesUid !== null) {
    let series;
    try {
      series = source.kind === 'dimse'
        ? await findOnNode(source.node, 'series', { study_uid: studyUid }, 10_000)
        : await searchWeb(source.remote, 'series', { study_uid: studyUid }, 10_000);
    } catch (err) {
      throw peerFailure(source, err);
    }
    const one = series.items.find((item) => item.level === 'series' && item.series_uid === seriesUid);
    if (!one || one.level !== 'series') return { studies: [], patientId: study.patient_id, notFound: `series ${seriesUid} is not in study ${studyUid} on ${source.info.name}` };
    return { studies: [pending(study, seriesUid, one.instance_count)], patientId: study.patient_id, notFound: null };
  }
  return { studies: [pending(study, null, study.instance_count)], patientId: study.patient_id, notFound: null };
}

/**
 * Whether any rule lets the peer's AE title call mia's SCP (an allowed peer, or --dicom-allow):
 * only when none does is a failed move blamed on it (the host check is the SCP's, per call).
 */
async function mayCallIn(deps: RetrieveDeps, aeTitle: string): Promise<boolean> {
  if ((deps.config.dicom?.allow ?? []).some((a) => a.aeTitle === aeTitle)) return true;
  return (await findIncomingPeers(deps.db, aeTitle)).length > 0;
}

/**
 * Settles what to fetch, records the retrieve and hands it to the runner. A study or series the
 * peer does not have makes a record that is failed from the start, naming what is missing.
 */
export async function startRetrieve(deps: RetrieveDeps, runner: RetrieveRunner, body: RetrieveBody, by: string, destination: Destination): Promise<RetrieveRecord> {
  const source = await resolveSource(deps, body.peer);
  if (source.kind === 'dimse' && destination === null) {
    throw conflict(
      'mia has no DICOM listener to receive a C-MOVE',
      `start mia with a DICOM port (mia serve --dicom-port N --ae-title AE) and add that AE title, this host and port to ${source.info.name}'s DICOM nodes`,
    );
  }
  const planned = await plan(source, body);
  const target = body.priors_of_patient_id !== undefined ? 'priors' : body.series_uid !== undefined ? 'series' : 'study';
  const at = deps.clock.now().toISOString();
  const status: RetrieveStatus = planned.notFound !== null ? 'failed' : planned.studies.length === 0 ? 'completed' : 'running';
  const row = await insertRetrieve(deps.db, {
    peer_id: source.info.id,
    peer_name: source.info.name,
    method: source.kind === 'dimse' ? 'c-move' : 'wado-rs',
    target_kind: target,
    study_uid: body.study_uid ?? null,
    series_uid: body.series_uid ?? null,
    patient_id: planned.patientId,
    options: JSON.stringify({ before: body.before, modalities: body.modalities } satisfies Options),
    status,
    studies: JSON.stringify(planned.studies),
    error: planned.notFound,
    owner_node: status === 'running' ? deps.node.id : null,
    owner_pid: status === 'running' ? deps.node.pid : null,
    created_by: by,
    at,
  });
  if (status === 'running') {
    const peerMayCallIn = source.kind !== 'dimse' || (await mayCallIn(deps, source.node.calledAeTitle));
    runner.launch({ row, source, studies: planned.studies, destination: destination?.aeTitle ?? '', destinationPort: destination?.port ?? null, peerMayCallIn, by });
  }
  return toRecord(row);
}

export async function getRetrieve(deps: { db: RetrieveDeps['db'] }, id: string): Promise<RetrieveRecord> {
  const row = await findRetrieve(deps.db, id);
  if (!row) throw notFound('Retrieve', id);
  return toRecord(row);
}

export async function listRetrieves(deps: { db: RetrieveDeps['db'] }, filter: { status?: RetrieveStatus | undefined }, page: PageRequest): Promise<Page<RetrieveRecord>> {
  const rows = await listRetrieveRows(deps.db, filter, page);
  return { items: rows.items.map(toRecord), nextAfterId: rows.nextAfterId };
}
