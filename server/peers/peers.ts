/**
 * The DICOM nodes (PACS, modalities, viewers) and DICOMweb servers this install talks to, by a
 * name the admin chooses. mia's SCP lets a node call it only if the node is here with "allow
 * incoming" and the host it calls from; C-MOVE sends only to such nodes; query/retrieve, routing
 * and the DICOMweb client take their destinations from here.
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { conflict, invalid, notFound } from '#server/errors.ts';
import type { Clock } from '#server/clock.ts';
import type { Database } from '#server/store/database.ts';
import {
  deletePeerRow,
  findIncomingPeers,
  findPeer,
  findPeerByName,
  insertPeer,
  listPeerRows,
  updatePeerRow,
  type PeerFields,
  type PeerRow,
} from '#server/store/dicom-peers.ts';

/** More than a site has; the list is read whole. */
export const MAX_PEERS = 1000;

/** PS3.5 AE: at most 16 characters, no backslash or control characters, not only spaces. */
export const aeTitle = z
  .string()
  .max(16, 'an AE title has at most 16 characters')
  .regex(/^[\x20-\x5b\x5d-\x7e]+$/, 'an AE title has printable ASCII characters except backslash')
  .refine((s) => s.trim().length > 0, 'an AE title is not only spaces')
  .transform((s) => s.trim());

const hostName = z
  .string()
  .min(1)
  .max(253)
  .refine((h) => isIP(h) !== 0 || /^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/.test(h), 'a host name or IP address');

const baseUrl = z
  .string()
  .max(2000)
  .url()
  .refine((u) => /^https?:\/\//i.test(u), 'an http:// or https:// URL')
  .transform((u) => u.replace(/\/+$/, ''));

const authHeader = z.string().min(1).max(4096).regex(/^[\x20-\x7e]+$/, 'printable ASCII (an HTTP header value)');

const peerName = z.string().min(1).max(64).regex(/^[A-Za-z0-9][A-Za-z0-9 ._-]*$/, 'letters, digits, space, dot, dash or underscore');

const dimseFields = z.object({
  kind: z.literal('dimse'),
  name: peerName,
  ae_title: aeTitle,
  host: hostName,
  port: z.number().int().min(1).max(65535),
  allow_incoming: z.boolean().default(false),
}).strict();

const dicomwebFields = z.object({
  kind: z.literal('dicomweb'),
  name: peerName,
  url: baseUrl,
  /** The Authorization header value the server wants (e.g. "Bearer ..." or "Basic ..."). */
  authorization: authHeader.nullable().optional(),
}).strict();

export const peerBody = z.discriminatedUnion('kind', [dimseFields, dicomwebFields]);
export type PeerBody = z.output<typeof peerBody>;

export const peerParams = z.object({ id: z.string().regex(/^peer_[0-9a-f]{24}$/, 'a peer_ id') });

export const peer = z.object({
  id: z.string(),
  name: z.string(),
  kind: z.enum(['dimse', 'dicomweb']),
  ae_title: z.string().nullable(),
  host: z.string().nullable(),
  port: z.number().int().nullable(),
  url: z.string().nullable(),
  /** Whether an Authorization header is stored; the header itself is never returned. */
  has_authorization: z.boolean(),
  allow_incoming: z.boolean(),
  created_by: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});
export type Peer = z.output<typeof peer>;

/** A DICOM node as the SCU needs it. */
export type DimsePeer = { name: string; aeTitle: string; host: string; port: number };
/** A DICOMweb server as the client needs it. */
export type DicomWebPeer = { name: string; url: string; headers: Record<string, string> };

export function toPeer(row: PeerRow): Peer {
  return {
    id: row.public_id,
    name: row.name,
    kind: row.kind,
    ae_title: row.ae_title,
    host: row.host,
    port: row.port === null ? null : Number(row.port),
    url: row.url,
    has_authorization: row.auth_header !== null,
    allow_incoming: Number(row.allow_incoming) === 1,
    created_by: row.created_by,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

function toFields(body: PeerBody, previous?: PeerRow): PeerFields {
  if (body.kind === 'dimse') {
    return { name: body.name, kind: 'dimse', ae_title: body.ae_title, host: body.host, port: body.port, url: null, auth_header: null, allow_incoming: body.allow_incoming };
  }
  // Leaving `authorization` out of an update keeps the stored header (the API never shows it).
  const keep = body.authorization === undefined && previous?.kind === 'dicomweb' ? previous.auth_header : null;
  return { name: body.name, kind: 'dicomweb', ae_title: null, host: null, port: null, url: body.url, auth_header: body.authorization ?? keep, allow_incoming: false };
}

type Deps = { db: Database; clock: Clock };

export async function listPeers(deps: Deps): Promise<Peer[]> {
  return (await listPeerRows(deps.db, MAX_PEERS)).map(toPeer);
}

export async function getPeer(deps: Deps, id: string): Promise<Peer> {
  const row = await findPeer(deps.db, id);
  if (!row) throw notFound('Peer', id);
  return toPeer(row);
}

export async function createPeer(deps: Deps, body: PeerBody, by: string): Promise<Peer> {
  if (await findPeerByName(deps.db, body.name)) throw conflict('A peer with this name exists', `name ${body.name} is taken; choose another or change that peer`);
  if ((await listPeerRows(deps.db, MAX_PEERS)).length >= MAX_PEERS) throw invalid('Too many peers', `at most ${MAX_PEERS}`);
  return toPeer(await insertPeer(deps.db, toFields(body), by, deps.clock.now().toISOString()));
}

export async function updatePeer(deps: Deps, id: string, body: PeerBody): Promise<Peer> {
  const row = await findPeer(deps.db, id);
  if (!row) throw notFound('Peer', id);
  const other = await findPeerByName(deps.db, body.name);
  if (other && other.id !== row.id) throw conflict('A peer with this name exists', `name ${body.name} is taken`);
  await updatePeerRow(deps.db, row.id, toFields(body, row), deps.clock.now().toISOString());
  return toPeer((await findPeer(deps.db, id)) as PeerRow);
}

export async function deletePeer(deps: Deps, id: string): Promise<Peer> {
  const row = await findPeer(deps.db, id);
  if (!row) throw notFound('Peer', id);
  await deletePeerRow(deps.db, row.id);
  return toPeer(row);
}

/** A peer named by id (peer_...) or by name, of the kind the caller needs. */
async function resolvePeer(deps: Deps, ref: string, kind: 'dimse' | 'dicomweb'): Promise<PeerRow> {
  const row = /^peer_[0-9a-f]{24}$/.test(ref) ? await findPeer(deps.db, ref) : await findPeerByName(deps.db, ref);
  if (!row) throw notFound('Peer', ref);
  if (row.kind !== kind) throw invalid(`Peer ${row.name} is not a ${kind === 'dimse' ? 'DICOM node' : 'DICOMweb server'}`, `it is a ${row.kind} peer`);
  return row;
}

export async function dimsePeer(deps: Deps, ref: string): Promise<DimsePeer> {
  const row = await resolvePeer(deps, ref, 'dimse');
  return { name: row.name, aeTitle: row.ae_title ?? '', host: row.host ?? '', port: Number(row.port) };
}

export async function dicomWebPeer(deps: Deps, ref: string): Promise<DicomWebPeer> {
  const row = await resolvePeer(deps, ref, 'dicomweb');
  return { name: row.name, url: row.url ?? '', headers: row.auth_header ? { Authorization: row.auth_header } : {} };
}

/**
 * Whether a calling AE from this address may open an association with mia's SCP: a DICOM node
 * with that AE title, allowed incoming, whose host is the address (or resolves to it: the caller
 * checks names). An address is compared as given, with IPv4-mapped IPv6 unwrapped.
 */
export async function incomingPeersFor(deps: Deps, callingAeTitle: string): Promise<DimsePeer[]> {
  return (await findIncomingPeers(deps.db, callingAeTitle.trim())).map((row) => ({ name: row.name, aeTitle: row.ae_title ?? '', host: row.host ?? '', port: Number(row.port) }));
}
