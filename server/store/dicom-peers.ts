/** SQL for the DICOM nodes and DICOMweb servers this install talks to (migration 25). */
import type { Database } from '#server/store/database.ts';
import { newPublicId } from '#server/store/public-id.ts';

export type PeerKind = 'dimse' | 'dicomweb';

export type PeerRow = {
  id: number;
  public_id: string;
  name: string;
  kind: PeerKind;
  ae_title: string | null;
  host: string | null;
  port: number | null;
  url: string | null;
  auth_header: string | null;
  allow_incoming: number;
  created_by: string;
  created_at: string;
  updated_at: string;
};

export type PeerFields = {
  name: string;
  kind: PeerKind;
  ae_title: string | null;
  host: string | null;
  port: number | null;
  url: string | null;
  auth_header: string | null;
  allow_incoming: boolean;
};

export async function insertPeer(db: Database, fields: PeerFields, by: string, at: string): Promise<PeerRow> {
  const publicId = newPublicId('peer');
  await db.run(
    `INSERT INTO dicom_peers (public_id, name, kind, ae_title, host, port, url, auth_header, allow_incoming, created_by, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [publicId, fields.name, fields.kind, fields.ae_title, fields.host, fields.port, fields.url, fields.auth_header, fields.allow_incoming ? 1 : 0, by, at, at],
  );
  return (await findPeer(db, publicId)) as PeerRow;
}

export async function updatePeerRow(db: Database, id: number, fields: PeerFields, at: string): Promise<void> {
  await db.run(
    `UPDATE dicom_peers SET name = ?, kind = ?, ae_title = ?, host = ?, port = ?, url = ?, auth_header = ?, allow_incoming = ?, updated_at = ? WHERE id = ?`,
    [fields.name, fields.kind, fields.ae_title, fields.host, fields.port, fields.url, fields.auth_header, fields.allow_incoming ? 1 : 0, at, id],
  );
}

export async function deletePeerRow(db: Database, id: number): Promise<void> {
  await db.run('DELETE FROM dicom_peers WHERE id = ?', [id]);
}

export async function findPeer(db: Database, publicId: string): Promise<PeerRow | undefined> {
  return (await db.get('SELECT * FROM dicom_peers WHERE public_id = ?', [publicId])) as PeerRow | undefined;
}

export async function findPeerByName(db: Database, name: string): Promise<PeerRow | undefined> {
  return (await db.get('SELECT * FROM dicom_peers WHERE name = ?', [name])) as PeerRow | undefined;
}

/** DICOM nodes with this AE title that may call mia (the SCP's check, and C-MOVE destinations). */
export async function findIncomingPeers(db: Database, aeTitle: string): Promise<PeerRow[]> {
  return (await db.all(`SELECT * FROM dicom_peers WHERE kind = 'dimse' AND ae_title = ? AND allow_incoming = 1 ORDER BY id LIMIT 100`, [aeTitle])) as PeerRow[];
}

/** Every peer, by name; a site has tens of them, not thousands (bounded anyway). */
export async function listPeerRows(db: Database, limit: number): Promise<PeerRow[]> {
  return (await db.all('SELECT * FROM dicom_peers ORDER BY name LIMIT ?', [limit])) as PeerRow[];
}
