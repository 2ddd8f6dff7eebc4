/**
 * What must hold after any kill -9: the database passes SQLite's own checks, and every instance
 * acknowledged before the kill (a 200 to its upload, or committed when the process was stopped
 * for its kill) is still indexed, its file readable and holding the same bytes.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { expect } from 'vitest';

/** SOP Instance UID -> SHA-256 of the file. */
export type Acknowledged = Map<string, string>;

export function openReadOnly(dataDir: string): BetterSqlite3.Database {
  return new BetterSqlite3(join(dataDir, 'mia.sqlite'), { readonly: true });
}

export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The instances committed now (read while the writer is stopped, it is what a kill leaves). */
export function committedInstances(dataDir: string): Acknowledged {
  const db = openReadOnly(dataDir);
  try {
    const rows = db.prepare('SELECT sop_instance_uid AS uid, file_sha256 AS sha FROM instances').all() as Array<{ uid: string; sha: string }>;
    return new Map(rows.map((r) => [r.uid, r.sha]));
  } finally {
    db.close();
  }
}

export function expectIntact(dataDir: string, acknowledged: Acknowledged): void {
  const db = openReadOnly(dataDir);
  try {
    expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(db.pragma('foreign_key_check')).toEqual([]);
    const find = db.prepare('SELECT file_path, file_sha256, file_size FROM instances WHERE sop_instance_uid = ?');
    const lost: string[] = [];
    for (const [uid, sha] of acknowledged) {
      const row = find.get(uid) as { file_path: string; file_sha256: string; file_size: number } | undefined;
      if (!row) {
        lost.push(uid);
        continue;
      }
      expect(row.file_sha256, uid).toBe(sha);
      const bytes = readFileSync(join(dataDir, row.file_path));
      expect(bytes.length, row.file_path).toBe(row.file_size);
      expect(sha256(bytes), row.file_path).toBe(sha);
    }
    expect(lost, 'acknowledged instances missing after the kill').toEqual([]);
  } finally {
    db.close();
  }
}

/** Import jobs by status: none may stay `running` for a process that is gone. */
export function importJobStatuses(dataDir: string): Record<string, number> {
  const db = openReadOnly(dataDir);
  try {
    const rows = db.prepare('SELECT status, COUNT(*) AS n FROM import_jobs GROUP BY status').all() as Array<{ status: string; n: number }>;
    return Object.fromEntries(rows.map((r) => [r.status, r.n]));
  } finally {
    db.close();
  }
}
