/**
 * De-identification for exports: patient ids and DICOM UIDs are replaced by keyed hashes
 * (HMAC-SHA-256 with a per-installation secret), so the same patient gets the same pseudonym in
 * every export from this installation (records stay linkable) while nobody without the secret
 * can reverse or recompute them (PS3.15 E.1: replace identifiers consistently).
 */
import { createHmac, randomBytes } from 'node:crypto';
import type { Database } from '#server/store/database.ts';
import { ensureSetting } from '#server/store/settings.ts';

export type Pseudonymizer = {
  patientId(id: string): string;
  uid(uid: string): string;
  /** mia's own record ids (analyses, findings): the API would map them back to the scan. */
  recordId(id: string): string;
};

/** The installation's pseudonym key (hex), made at the first de-identified export. */
export async function pseudonymSecret(db: Database): Promise<string> {
  return await ensureSetting(db, 'pseudonym_secret', randomBytes(32).toString('hex'));
}

export async function createPseudonymizer(db: Database): Promise<Pseudonymizer> {
  return pseudonymizerOf(await pseudonymSecret(db));
}

/** Pseudonyms under a key already read (an export's worker threads get it from the export). */
export function pseudonymizerOf(secretHex: string): Pseudonymizer {
  const secret = Buffer.from(secretHex, 'hex');
  const digest = (kind: string, value: string): Buffer => createHmac('sha256', secret).update(`${kind}\u0000${value}`).digest();
  return {
    patientId: (id) => `ANON-${digest('patient', id).subarray(0, 8).toString('hex').toUpperCase()}`,
    // 2.25.<decimal of 128 bits> is the UUID-derived UID form of PS3.5 B.2: valid and unique.
    uid: (uid) => `2.25.${BigInt('0x' + digest('uid', uid).subarray(0, 16).toString('hex')).toString()}`,
    recordId: (id) => `anon_${digest('record', id).subarray(0, 12).toString('hex')}`,
  };
}
