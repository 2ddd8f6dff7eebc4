/**
 * The peers a reader searches and retrieves from, as each protocol needs them: a DICOM node as
 * the SCU's called AE (mia calling as its own AE title), a DICOMweb server as a URL with its
 * headers. Readers see a peer's id, name and kind only; hosts, URLs and credentials stay with the
 * admins who set them (GET /v1/dicom/peers).
 */
import type { Clock } from '#server/clock.ts';
import type { ServerConfig } from '#server/config.ts';
import { MiaError, notFound } from '#server/errors.ts';
import type { DicomWebRemote } from '#server/dicomweb/client.ts';
import { DimseError, type DimsePeer } from '#server/dimse/scu.ts';
import { dicomWebPeer, dimsePeer, listPeers } from '#server/peers/peers.ts';
import type { Database } from '#server/store/database.ts';
import { findPeer, findPeerByName } from '#server/store/dicom-peers.ts';

/** mia's calling AE title when it has no DICOM listener of its own. */
export const DEFAULT_AE_TITLE = 'MIA';
/** Searching waits this long for a silent peer: a reader is at the screen. */
export const QUERY_TIMEOUT_MS = 20_000;

export type SourceDeps = { db: Database; clock: Clock; config: Pick<ServerConfig, 'dicom'> };

export type SourceInfo = { id: string; name: string; kind: 'dimse' | 'dicomweb' };

export type Source =
  | { kind: 'dimse'; info: SourceInfo; node: DimsePeer }
  | { kind: 'dicomweb'; info: SourceInfo; remote: DicomWebRemote };

export async function listSources(deps: SourceDeps): Promise<SourceInfo[]> {
  return (await listPeers(deps)).map((p) => ({ id: p.id, name: p.name, kind: p.kind }));
}

/** mia's own AE title: the listener's when it has one. */
export function ownAeTitle(config: Pick<ServerConfig, 'dicom'>): string {
  return config.dicom?.aeTitle ?? DEFAULT_AE_TITLE;
}

/** A peer by id (peer_...) or name. */
export async function resolveSource(deps: SourceDeps, ref: string, options: { callingAeTitle?: string; timeoutMs?: number } = {}): Promise<Source> {
  const row = /^peer_[0-9a-f]{24}$/.test(ref) ? await findPeer(deps.db, ref) : await findPeerByName(deps.db, ref);
  if (!row) throw notFound('Peer', ref);
  const info: SourceInfo = { id: row.public_id, name: row.name, kind: row.kind };
  if (row.kind === 'dicomweb') {
    const peer = await dicomWebPeer(deps, row.public_id);
    return { kind: 'dicomweb', info, remote: { url: peer.url, headers: peer.headers } };
  }
  const peer = await dimsePeer(deps, row.public_id);
  return {
    kind: 'dimse',
    info,
    node: {
      host: peer.host,
      port: peer.port,
      calledAeTitle: peer.aeTitle,
      callingAeTitle: options.callingAeTitle ?? ownAeTitle(deps.config),
      timeoutMs: options.timeoutMs ?? QUERY_TIMEOUT_MS,
    },
  };
}

/**
 * A DIMSE failure as the reader should read it: which peer, and what happened (refused
 * connection, association rejected with the reason, a timeout, a refused request). 422: the
 * request was understood but the peer did not serve it; a retry helps once the peer does.
 */
export function peerFailure(source: Source, err: unknown): unknown {
  if (!(err instanceof DimseError)) return err;
  const { info } = source;
  const title: Record<DimseError['kind'], string> = {
    connect: `${info.name} is not reachable`,
    timeout: `${info.name} did not answer in time`,
    rejected: `${info.name} rejected the association`,
    aborted: `${info.name} aborted the association`,
    protocol: `${info.name} broke the DICOM protocol`,
    refused: `${info.name} refused the request`,
  };
  // Orthanc (and other PACS) abort or reject a caller they do not know rather than say why.
  const callingAeTitle = source.kind === 'dimse' ? source.node.callingAeTitle : '';
  const hint = err.kind === 'aborted' || err.kind === 'rejected' ? `; a PACS that does not know mia's AE title ${callingAeTitle} as a DICOM node refuses it this way` : '';
  return new MiaError('unprocessable', title[err.kind], `${err.message}${hint}`);
}
