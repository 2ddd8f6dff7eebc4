/**
 * `mia dicom retrieve` and `mia dicom peers`, for headless installs: the DICOM peers of the data
 * folder (as the admin's /v1/dicom/peers), and a retrieve run in this process with the same
 * record the "Search PACS" screen follows. A C-MOVE sends to mia's AE title (--dest, default
 * MIA): the `mia serve --dicom-port` of this data folder receives and imports what arrives.
 * Exit 1 when the retrieve did not complete.
 */
import { recordAudit } from '#server/audit/audit.ts';
import { retrieveBody, type RetrieveRecord } from '#server/api/query-retrieve-schemas.ts';
import { systemClock } from '#server/clock.ts';
import { formatTable } from '#server/cli/table.ts';
import { MiaError } from '#server/errors.ts';
import { isValidAeTitle } from '#server/dimse/pdu.ts';
import type { DimsePeer } from '#server/dimse/scu.ts';
import { createPeer, deletePeer, dimsePeer, listPeers, peerBody } from '#server/peers/peers.ts';
import { getRetrieve, startRetrieve } from '#server/query-retrieve/retrieves.ts';
import { DEFAULT_AE_TITLE } from '#server/query-retrieve/sources.ts';
import { createRuntime } from '#server/runtime.ts';
import { openDataFolder } from '#server/data-folder.ts';
import type { Database } from '#server/store/database.ts';
import { findPeerByName } from '#server/store/dicom-peers.ts';

export type PacsIo = { out(line: string): void; err(line: string): void };
export type Place = { dataDir: string; databaseUrl: string | null };

const fail = (message: string): never => {
  throw new MiaError('invalid', message);
};
const text = (values: Record<string, unknown>, name: string): string | undefined => (typeof values[name] === 'string' ? values[name] : undefined);

async function audit(db: Database, action: string, target: string, patientId: string | null): Promise<void> {
  await recordAudit(db, { at: systemClock.now().toISOString(), request_id: null, key_id: 'cli', user_id: 'cli', action, target, patient_id: patientId, outcome: 'success', status_code: null });
}

/** A DICOM node peer of the data folder as the SCU calls it (--peer NAME of mia dicom find|move). */
export async function dimsePeerOf(place: Place, ref: string, callingAeTitle: string): Promise<DimsePeer> {
  const folder = await openDataFolder(place.dataDir, { databaseUrl: place.databaseUrl });
  try {
    const peer = await dimsePeer({ db: folder.db, clock: systemClock }, ref);
    return { host: peer.host, port: peer.port, calledAeTitle: peer.aeTitle, callingAeTitle };
  } finally {
    await folder.close();
  }
}

function studyRows(record: RetrieveRecord): string[][] {
  return record.studies.map((s) => [
    s.study_uid,
    s.study_date,
    s.modalities.join(','),
    s.status,
    String(s.completed),
    String(s.failed),
    String(s.warning),
    s.import_jobs.join(','),
    s.error ?? '',
  ]);
}

async function retrieve(values: Record<string, unknown>, place: Place, io: PacsIo): Promise<number> {
  const destination = text(values, 'dest') ?? DEFAULT_AE_TITLE;
  if (!isValidAeTitle(destination)) fail(`--dest ${destination}: not an AE title`);
  const modalities = text(values, 'modality')?.split(',').map((m) => m.trim()).filter(Boolean);
  const parsed = retrieveBody.safeParse({
    peer: text(values, 'peer') ?? fail('dicom retrieve needs --peer NAME (mia dicom peers list)'),
    study_uid: text(values, 'study'),
    series_uid: text(values, 'series'),
    priors_of_patient_id: text(values, 'priors'),
    before: text(values, 'before'),
    modalities,
  });
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const flag = { study_uid: '--study', series_uid: '--series', priors_of_patient_id: '--priors', before: '--before', modalities: '--modality', peer: '--peer' }[String(issue?.path[0] ?? '')] ?? '';
    return fail(`dicom retrieve ${flag}: ${issue?.message ?? 'invalid'} (--study UID [--series UID] | --priors PATIENT_ID [--before YYYY-MM-DD] [--modality CT,MR])`);
  }
  // The C-MOVE's instances arrive at the mia serve of this folder; this process only asks and follows.
  const runtime = await createRuntime({ logToStderr: false, databaseUrl: place.databaseUrl, clock: systemClock, dataDir: place.dataDir }, { background: false });
  try {
    const started = await startRetrieve(runtime, runtime.retrieves, parsed.data, 'cli', { aeTitle: destination, port: null });
    await audit(runtime.db, 'dicom.retrieve', `retrieve:${started.id}`, started.target.patient_id);
    io.err(`retrieve ${started.id} from ${started.source.name} (${started.method}): ${started.studies.length} stud(ies)`);
    await runtime.retrieves.idle();
    const record = await getRetrieve(runtime, started.id);
    if (record.studies.length > 0) {
      io.out(formatTable(['STUDY UID', 'DATE', 'MODALITIES', 'STATUS', 'COMPLETED', 'FAILED', 'WARNING', 'IMPORT JOBS', 'ERROR'], studyRows(record)));
    }
    io.err(`${record.status}: ${record.counts.completed} instance(s) completed, ${record.counts.failed} failed, ${record.counts.warning} warning${record.error ? ` - ${record.error}` : ''}`);
    return record.status === 'completed' ? 0 : 1;
  } finally {
    await runtime.stop();
  }
}

async function peers(sub: string | undefined, args: readonly string[], values: Record<string, unknown>, place: Place, io: PacsIo): Promise<number> {
  const folder = await openDataFolder(place.dataDir, { databaseUrl: place.databaseUrl });
  const deps = { db: folder.db, clock: systemClock };
  try {
    switch (sub) {
      case 'list': {
        const all = await listPeers(deps);
        io.out(
          formatTable(
            ['ID', 'NAME', 'KIND', 'AE TITLE', 'HOST', 'PORT', 'URL', 'AUTHORIZATION', 'INCOMING'],
            all.map((p) => [p.id, p.name, p.kind, p.ae_title ?? '', p.host ?? '', p.port === null ? '' : String(p.port), p.url ?? '', p.has_authorization ? 'stored' : '', p.allow_incoming ? 'allowed' : '']),
          ),
        );
        return 0;
      }
      case 'add': {
        const url = text(values, 'url');
        const port = text(values, 'port');
        const body = peerBody.safeParse(
          url !== undefined
            ? { kind: 'dicomweb', name: text(values, 'name'), url, authorization: text(values, 'authorization') }
            : { kind: 'dimse', name: text(values, 'name'), ae_title: text(values, 'ae-title'), host: text(values, 'host'), port: port === undefined ? undefined : Number(port), allow_incoming: values['allow-incoming'] === true },
        );
        if (!body.success) {
          const issue = body.error.issues[0];
          const field = String(issue?.path[0] ?? '');
          return fail(`dicom peers add --${field.replace('_', '-')}: ${issue?.message ?? 'invalid'} (a node: --name --ae-title --host --port [--allow-incoming]; a DICOMweb server: --name --url [--authorization VALUE])`);
        }
        const created = await createPeer(deps, body.data, 'cli');
        await audit(folder.db, 'dicom.peer_create', `peer:${created.id}`, null);
        io.out(`added ${created.kind === 'dimse' ? 'DICOM node' : 'DICOMweb server'} ${created.name} (${created.id})`);
        return 0;
      }
      case 'remove': {
        const ref = args[0] ?? fail('dicom peers remove needs a peer id or name (mia dicom peers list)');
        const id = /^peer_[0-9a-f]{24}$/.test(ref) ? ref : ((await findPeerByName(folder.db, ref))?.public_id ?? fail(`no peer named ${ref}`));
        const removed = await deletePeer(deps, id);
        await audit(folder.db, 'dicom.peer_delete', `peer:${removed.id}`, null);
        io.out(`removed ${removed.name} (${removed.id})`);
        return 0;
      }
      default:
        return fail('dicom peers: expected add, list or remove');
    }
  } finally {
    await folder.close();
  }
}

export async function pacsCommand(sub: 'retrieve' | 'peers', args: readonly string[], values: Record<string, unknown>, place: Place, io: PacsIo): Promise<number> {
  if (sub === 'retrieve') return await retrieve(values, place, io);
  const [action, ...rest] = args;
  return await peers(action, rest, values, place, io);
}
