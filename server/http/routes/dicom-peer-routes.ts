/** The DICOM nodes and DICOMweb servers this install talks to (admin only). */
import { defineRoute, scopes, type Route } from '#server/http/route.ts';
import { createPeer, deletePeer, getPeer, listPeers, peer, peerBody, peerParams, updatePeer } from '#server/peers/peers.ts';

const admin = scopes('manage:users');

export const dicomPeerRoutes: Route[] = [
  defineRoute({
    method: 'get',
    path: '/v1/dicom/peers',
    summary: 'DICOM nodes and DICOMweb servers mia talks to, by name',
    access: admin,
    response: peer,
    list: true,
    audit: 'dicom.peers',
    handle: async ({ services }) => ({ kind: 'list', items: await listPeers(services), nextAfterId: null }),
  }),
  defineRoute({
    method: 'post',
    path: '/v1/dicom/peers',
    summary: 'Add a DICOM node (AE title, host, port) or a DICOMweb server (URL, Authorization header)',
    access: admin,
    body: peerBody,
    response: peer,
    successStatus: 201,
    audit: 'dicom.peer_create',
    handle: async ({ services, body, auth, audit }) => {
      const created = await createPeer(services, body, auth.userId);
      audit({ target: `peer:${created.id}` });
      return { kind: 'data', status: 201, data: created };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/v1/dicom/peers/{id}',
    summary: 'One DICOM node or DICOMweb server',
    access: admin,
    params: peerParams,
    response: peer,
    audit: 'dicom.peer_read',
    handle: async ({ services, params, audit }) => {
      audit({ target: `peer:${params.id}` });
      return { kind: 'data', data: await getPeer(services, params.id) };
    },
  }),
  defineRoute({
    method: 'put',
    path: '/v1/dicom/peers/{id}',
    summary: 'Change a peer (a DICOMweb server\'s Authorization header is kept when left out)',
    access: admin,
    params: peerParams,
    body: peerBody,
    response: peer,
    audit: 'dicom.peer_update',
    handle: async ({ services, params, body, audit }) => {
      audit({ target: `peer:${params.id}` });
      return { kind: 'data', data: await updatePeer(services, params.id, body) };
    },
  }),
  defineRoute({
    method: 'delete',
    path: '/v1/dicom/peers/{id}',
    summary: 'Remove a peer (a node removed can no longer call mia)',
    access: admin,
    params: peerParams,
    response: peer,
    audit: 'dicom.peer_delete',
    handle: async ({ services, params, audit }) => {
      audit({ target: `peer:${params.id}` });
      return { kind: 'data', data: await deletePeer(services, params.id) };
    },
  }),
];
