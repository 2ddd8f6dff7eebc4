/**
 * Runs retrieves in this process, study by study, and keeps their record current: each study's
 * status, sub-operation counts (completed, failed, warning, remaining) and the import jobs its
 * instances went into. A few run at once; the rest wait their turn in memory. A retrieve is not
 * resumed after a stop or crash (the peer may have changed, and the user asked once): its record
 * says interrupted, and retrieving again skips what already arrived (duplicates).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { MiaError } from '#server/errors.ts';
import { codeOf } from '#server/storage-errors.ts';
import type { ImportDeps } from '#server/imports/imports.ts';
import { firstValue, pullFromRemote, searchRemote } from '#server/dicomweb/client.ts';
import { DimseError, dicomMove, type MoveReport } from '#server/dimse/scu.ts';
import { STATUS } from '#server/dimse/command-set.ts';
import { isAbandoned } from '#server/jobs/jobs.ts';
import type { RetrieveStudy } from '#server/api/query-retrieve-schemas.ts';
import type { Source } from '#server/query-retrieve/sources.ts';
import { parseStudies } from '#server/query-retrieve/study-list.ts';
import {
  finishRetrieve,
  importJobsSince,
  lastImportJobId,
  listRunningRetrieves,
  updateRetrieveProgress,
  type RetrieveProgress,
  type RetrieveRow,
  type RetrieveStatus,
} from '#server/store/retrieves.ts';

/** Retrieves a node runs at once; a PACS serves moves one by one per caller anyway. */
const CONCURRENT = 2;
/** Progress is written at most this often per retrieve (a study sends a pending response per instance). */
const PROGRESS_EVERY_MS = 500;
/** A C-MOVE sends a pending response per instance; a large one may take this long. */
const MOVE_RESPONSE_TIMEOUT_MS = 5 * 60_000;
const MAX_IMPORT_JOBS_PER_STUDY = 100;
const INTERRUPTED = 'mia stopped before the retrieve finished; retrieve again (instances already here are kept)';
/**
 * A retrieve's end that could not be written (a full disk, a database locked past its timeout)
 * is written again, each wait twice the last up to a minute: left unwritten, the record said
 * running until the next start. Bounded (~6 minutes of waits): a store that refuses for good (read
 * only, damaged) must not hold one of the CONCURRENT places, or a CLI waiting for its retrieve,
 * for ever; the next start's sweep then marks it interrupted.
 */
const END_RETRY_FIRST_MS = 1000;
const END_RETRY_MAX_MS = 60_000;
const END_ATTEMPTS = 11;

export type LaunchedRetrieve = {
  row: RetrieveRow;
  source: Source;
  studies: RetrieveStudy[];
  /** mia's AE title as C-MOVE destination, and the port its SCP listens on (for the error text). */
  destination: string;
  destinationPort: number | null;
  /** Whether mia's SCP lets the peer's AE title call in from its host (its C-MOVE stores come so). */
  peerMayCallIn: boolean;
  by: string;
};

export type RetrieveRunner = {
  launch(retrieve: LaunchedRetrieve): void;
  /** Marks retrieves whose process is gone as interrupted. */
  sweep(): Promise<void>;
  /** Resolves when nothing runs or waits (the CLI waits for its retrieve). */
  idle(): Promise<void>;
  stop(): Promise<void>;
};

const hex = (status: number): string => `0x${status.toString(16).toUpperCase().padStart(4, '0')}`;

/** Why a C-MOVE did not bring everything, in the words of PS3.4 C.4.2.1.5, with what to do. */
export function moveProblem(report: MoveReport, peerName: string, destination: string, port: number | null): string | null {
  const comment = report.errorComment ? ` (${report.errorComment})` : '';
  const fix = `add ${destination}, this host and port ${port ?? 'of mia serve --dicom-port'} to ${peerName}'s DICOM nodes`;
  switch (true) {
    case report.status === STATUS.moveDestinationUnknown:
      return `${peerName} does not know mia's AE title ${destination} as a move destination (status 0xA801): ${fix}`;
    // Orthanc answers an unknown destination with 0xC000 rather than 0xA801 (measured, Debian's 1.12).
    case (report.status & 0xf000) === 0xc000 && report.completed === 0:
      return `${peerName} could not process the move (status ${hex(report.status)})${comment}; a PACS that does not know mia's AE title ${destination} as a move destination answers so: ${fix}`;
    case report.status === STATUS.outOfResources || report.status === STATUS.moveOutOfResourcesSubOps || (report.status & 0xff00) === 0xa700:
      return `${peerName} is out of resources (status ${hex(report.status)})${comment}`;
    case report.status === STATUS.dataSetDoesNotMatch:
      return `${peerName} did not understand the request (status 0xA900: identifier does not match the SOP class)${comment}`;
    case report.status === STATUS.cancel:
      return `${peerName} cancelled the move`;
    case report.status === STATUS.warningSubOpsFailed || report.failed > 0:
      return `${report.failed} instance(s) failed to arrive (status ${hex(report.status)})${comment}; ${peerName}'s log says why (mia refuses files that are not images it reads)`;
    case report.status !== STATUS.success:
      return `${peerName} failed the move (status ${hex(report.status)})${comment}`;
    case report.completed === 0 && report.warning === 0:
      return `${peerName} sent no instances`;
    default:
      return null;
  }
}

function errorText(err: unknown): string {
  if (err instanceof DimseError) return err.message;
  if (err instanceof MiaError) return err.details ? `${err.message}: ${err.details}` : err.message;
  return 'unexpected error';
}

/** Studies a stop cut short end failed, saying so; the counts stay as they were reached. */
function unfinished(studies: RetrieveStudy[]): RetrieveStudy[] {
  for (const study of studies) {
    if (study.status !== 'running' && study.status !== 'pending') continue;
    study.status = 'failed';
    study.error ??= 'interrupted';
  }
  return studies;
}

function progressOf(studies: readonly RetrieveStudy[]): RetrieveProgress {
  return {
    studies: JSON.stringify(studies),
    completed: studies.reduce((n, s) => n + s.completed, 0),
    failed: studies.reduce((n, s) => n + s.failed, 0),
    warning: studies.reduce((n, s) => n + s.warning, 0),
  };
}

export function createRetrieveRunner(deps: ImportDeps): RetrieveRunner {
  let stopped = false;
  const stopping = new AbortController();
  const active = new Map<number, { job: LaunchedRetrieve; done: Promise<void> }>();
  const queue: LaunchedRetrieve[] = [];
  let running = 0;
  const now = (): string => deps.clock.now().toISOString();

  async function fetchStudy(job: LaunchedRetrieve, study: RetrieveStudy, save: (force: boolean) => Promise<void>): Promise<void> {
    const { source } = job;
    if (source.kind === 'dimse') {
      const before = await lastImportJobId(deps.db);
      const report = await dicomMove(
        { ...source.node, timeoutMs: MOVE_RESPONSE_TIMEOUT_MS },
        { level: study.series_uid ? 'SERIES' : 'STUDY', studyInstanceUid: study.study_uid, seriesInstanceUid: study.series_uid ?? undefined, destination: job.destination },
        (progress) => {
          Object.assign(study, { completed: progress.completed, failed: progress.failed, warning: progress.warning, remaining: progress.remaining });
          void save(false);
        },
      );
      Object.assign(study, { completed: report.completed, failed: report.failed, warning: report.warning, remaining: report.remaining });
      // The peer stores into mia's SCP on associations of its own, each an import job created by
      // its AE title: those made since this move began. (Two retrieves from one peer at once may
      // each list the other's job too.)
      const jobs = await importJobsSince(deps.db, before, `dicom:${source.node.calledAeTitle}`, MAX_IMPORT_JOBS_PER_STUDY);
      study.import_jobs = jobs.map((j) => j.public_id);
      const refused = jobs.reduce((n, j) => n + j.conflicts + j.rejected, 0);
      // mia's SCP refused some: the peer's failure status is about those, not about mia's AE title.
      const problem = refused > 0 && report.status !== STATUS.success
        ? `mia refused ${refused} instance(s) ${source.info.name} sent (import jobs ${study.import_jobs.join(', ')} say why: already held with other bytes, or not an image mia reads), and ${source.info.name} ended the move with status ${hex(report.status)}`
        : !job.peerMayCallIn && report.completed === 0 && report.status !== STATUS.success
          ? `mia does not let ${source.info.name} (AE ${source.node.calledAeTitle}) call in, and a C-MOVE's instances come on an association it opens: allow incoming on the peer (Admin, DICOM peers) or mia serve --dicom-allow ${source.node.calledAeTitle}@${source.node.host} (${source.info.name} ended the move with status ${hex(report.status)})`
          : moveProblem(report, source.info.name, job.destination, job.destinationPort);
      study.status = problem === null ? 'completed' : 'failed';
      study.error = problem;
      return;
    }
    let seriesUids: string[];
    if (study.series_uid) seriesUids = [study.series_uid];
    else {
      const series = await searchRemote(source.remote, 'series', {}, { studyUid: study.study_uid });
      seriesUids = series.map((s) => firstValue(s, '0020000E')).filter((uid) => /^[0-9]+(\.[0-9]+)*$/.test(uid));
    }
    study.remaining = seriesUids.length;
    const problems: string[] = [];
    for (const seriesUid of seriesUids) {
      const pulled = await pullFromRemote(deps, source.remote, { studyUid: study.study_uid, seriesUid }, job.by);
      study.completed += pulled.counts.imported + pulled.counts.duplicates;
      // A conflict is an instance the archive already holds with another data set: the first
      // copy is kept, so the instance is here, but not as this peer has it.
      study.warning += pulled.counts.conflicts;
      study.failed += pulled.counts.rejected;
      study.import_jobs.push(...pulled.jobs);
      problems.push(...pulled.problems.filter((p) => !/already stored with different content/.test(p)));
      study.remaining -= 1;
      await save(false);
    }
    study.remaining = 0;
    const nothing = study.completed === 0 && study.failed === 0 && study.warning === 0;
    study.status = study.failed === 0 && !nothing ? 'completed' : 'failed';
    study.error = nothing ? `${source.info.name} sent no instances` : study.failed > 0 ? `${study.failed} instance(s) not stored: ${problems.slice(0, 3).join('; ')}` : null;
  }

  /** False when it could not be written (mia stopped first: the stop records it as interrupted). */
  async function recordEnd(row: RetrieveRow, end: Parameters<typeof finishRetrieve>[3]): Promise<boolean> {
    let wait = END_RETRY_FIRST_MS;
    for (let attempt = 1; !stopped; attempt += 1) {
      try {
        await finishRetrieve(deps.db, row.id, deps.node.id, end, now());
        return true;
      } catch (err) {
        const last = attempt >= END_ATTEMPTS;
        deps.log.error('retrieve.end_not_saved', { retrieve_id: row.public_id, status: end.status, error: codeOf(err) ?? (err instanceof Error ? err.name : 'non-error'), retry_in_ms: last ? null : wait });
        if (last) return false;
        await sleep(wait, undefined, { signal: stopping.signal }).catch(() => undefined);
        wait = Math.min(wait * 2, END_RETRY_MAX_MS);
      }
    }
    return false;
  }

  async function run(job: LaunchedRetrieve): Promise<void> {
    const { row, studies } = job;
    const release = deps.node.hold('retrieve', row.id);
    let lastWrite = 0;
    const progress = (): RetrieveProgress => progressOf(studies);
    const save = async (force: boolean): Promise<void> => {
      if (stopped || (!force && Date.now() - lastWrite < PROGRESS_EVERY_MS)) return;
      lastWrite = Date.now();
      await updateRetrieveProgress(deps.db, row.id, deps.node.id, progress(), now()).catch((err: unknown) => {
        deps.log.error('retrieve.progress_not_saved', { retrieve_id: row.public_id, error: err instanceof Error ? err.name : 'non-error' });
      });
    };
    try {
      for (const study of studies) {
        if (stopped) return;
        study.status = 'running';
        await save(true);
        try {
          await fetchStudy(job, study, save);
        } catch (err) {
          study.status = 'failed';
          study.error = errorText(err);
        }
      }
      if (stopped) return;
      const done = studies.filter((s) => s.status === 'completed').length;
      const status: RetrieveStatus = done === studies.length ? 'completed' : done === 0 && progress().completed === 0 ? 'failed' : 'partial';
      const firstError = studies.find((s) => s.error !== null)?.error ?? null;
      if (!(await recordEnd(row, { ...progress(), status, error: status === 'completed' ? null : firstError }))) return;
      const totals = progress();
      deps.log.info('retrieve.finished', { retrieve_id: row.public_id, method: row.method, status, studies: studies.length, completed: totals.completed, failed: totals.failed });
    } catch (err) {
      if (!stopped) deps.log.error('retrieve.failed', { retrieve_id: row.public_id, error: err instanceof Error ? err.name : 'non-error' });
    } finally {
      release();
    }
  }

  function next(): void {
    while (!stopped && running < CONCURRENT) {
      const job = queue.shift();
      if (!job) return;
      running += 1;
      const done = run(job).finally(() => {
        running -= 1;
        active.delete(job.row.id);
        next();
      });
      active.set(job.row.id, { job, done });
    }
  }

  return {
    launch(job) {
      if (stopped) return;
      queue.push(job);
      next();
    },
    async sweep() {
      const nowMs = deps.clock.now().getTime();
      for (const row of await listRunningRetrieves(deps.db, 1000)) {
        if (active.has(row.id) || queue.some((j) => j.row.id === row.id)) continue;
        if (await isAbandoned(deps.db, deps.node, 'retrieve', row, nowMs)) {
          await finishRetrieve(deps.db, row.id, null, { ...progressOf(unfinished(parseStudies(row.studies))), status: 'interrupted', error: INTERRUPTED }, now());
        }
      }
    },
    async idle() {
      while (active.size > 0 || queue.length > 0) await Promise.race([...active.values()].map((a) => a.done));
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      stopping.abort();
      // A C-MOVE cannot be taken back mid-way; the record says so and the user may retrieve again.
      const left = [...queue, ...[...active.values()].map((a) => a.job)];
      queue.length = 0;
      for (const job of left) {
        await finishRetrieve(deps.db, job.row.id, deps.node.id, { ...progressOf(unfinished(job.studies)), status: 'interrupted', error: INTERRUPTED }, now()).catch(() => false);
      }
    },
  };
}
