/**
 * Audit archive files (<data>/audit-archive/): the events retention moved out of the database,
 * one gzip-compressed JSON-lines file per batch, each beside a JSON sidecar with its SHA-256, row
 * count and id and time ranges, so a file can be checked and read without mia. The database
 * keeps the same record (audit_archives) and is what a read trusts: every read checks the file
 * against it, and a file that does not match is an error naming it, never a silent gap.
 */
import { createHash } from 'node:crypto';
import { closeSync, fsyncSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { z } from 'zod';
import { MiaError } from '#server/errors.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';
import type { AuditArchiveRecord, AuditRow } from '#server/store/audit.ts';

export const AUDIT_ARCHIVE_DIR = 'audit-archive';

const FORMAT = 'mia-audit-archive/1';

/** audit-<first id>-<last id>.jsonl.gz: ids are never reused, so names never collide. */
export function archiveFileName(firstId: number, lastId: number): string {
  const pad = (id: number): string => String(id).padStart(12, '0');
  return `audit-${pad(firstId)}-${pad(lastId)}.jsonl.gz`;
}

/** What retention writes in the folder: archives, sidecars, and either while being written. */
export const ARCHIVE_FOLDER_ENTRY = /^audit-\d{12}-\d{12}\.(?:jsonl\.gz|json)(?:\.tmp)?$/;

export function sidecarName(file: string): string {
  return file.replace(/\.jsonl\.gz$/, '.json');
}

const archivedRow = z
  .object({
    id: z.number().int().positive(),
    at: z.string(),
    request_id: z.string().nullable(),
    key_id: z.string().nullable(),
    user_id: z.string().nullable(),
    action: z.string(),
    target: z.string().nullable(),
    patient_id: z.string().nullable(),
    outcome: z.string(),
    status_code: z.number().int().nullable(),
    patient_ids: z.string().nullable(),
    address: z.string().nullable(),
    count: z.number().int().min(1),
  })
  .strict() satisfies z.ZodType<AuditRow>;

/**
 * Writes a file and its data to disk before it takes its final name. A link, not a rename:
 * an archive file, once written, is never replaced (EEXIST instead).
 */
function writeDurably(path: string, content: Buffer): void {
  const temporary = `${path}.tmp`;
  const fd = openSync(temporary, 'w', PRIVATE_FILE_MODE);
  try {
    writeSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(temporary, path);
  } finally {
    unlinkSync(temporary);
  }
}

/** The new names themselves reach the disk only with the folder. */
function syncFolder(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Writes `rows` (in id order, at least one) as an archive file and its sidecar, both on disk
 * when this returns. The caller records the result and deletes the rows in one transaction.
 */
export function writeAuditArchive(dir: string, rows: readonly AuditRow[], archivedAt: string): AuditArchiveRecord {
  const first = rows[0];
  const last = rows.at(-1);
  if (!first || !last) throw new MiaError('internal', 'an audit archive needs at least one event');
  const times = rows.map((row) => row.at).sort();
  const content = gzipSync(rows.map((row) => JSON.stringify(row)).join('\n') + '\n');
  const record: AuditArchiveRecord = {
    file: archiveFileName(first.id, last.id),
    sha256: createHash('sha256').update(content).digest('hex'),
    bytes: content.length,
    rows: rows.length,
    first_id: first.id,
    last_id: last.id,
    first_at: times[0] ?? first.at,
    last_at: times.at(-1) ?? last.at,
    archived_at: archivedAt,
  };
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  writeDurably(join(dir, record.file), content);
  writeDurably(join(dir, sidecarName(record.file)), Buffer.from(JSON.stringify({ format: FORMAT, ...record }, null, 2) + '\n'));
  syncFolder(dir);
  return record;
}

function damaged(file: string, details: string): MiaError {
  return new MiaError('internal', `Audit archive ${AUDIT_ARCHIVE_DIR}/${file} is damaged`, `${details}; restore the file from a backup`);
}

/** The events of a file's content, in order; throws naming the file when a line is not one. */
export function parseArchive(file: string, content: Buffer): AuditRow[] {
  let text: string;
  try {
    text = gunzipSync(content).toString('utf8');
  } catch {
    throw damaged(file, 'it does not decompress');
  }
  return text
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line, index) => {
      let parsed: unknown;
      try {
        parsed = JSON.parse(line);
      } catch {
        parsed = undefined;
      }
      const row = archivedRow.safeParse(parsed);
      if (!row.success) throw damaged(file, `line ${index + 1} is not an audit event`);
      return row.data;
    });
}

/** The events of a recorded archive, after checking the file against its record. */
export function readAuditArchive(dir: string, record: AuditArchiveRecord): AuditRow[] {
  let content: Buffer;
  try {
    content = readFileSync(join(dir, record.file));
  } catch (error) {
    const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'unreadable';
    throw damaged(record.file, code === 'ENOENT' ? 'the file is missing' : `the file cannot be read (${code})`);
  }
  const sha256 = createHash('sha256').update(content).digest('hex');
  if (sha256 !== record.sha256) {
    throw damaged(record.file, `its SHA-256 is ${sha256}, not the ${record.sha256} recorded when it was written`);
  }
  const rows = parseArchive(record.file, content);
  if (rows.length !== record.rows || rows[0]?.id !== record.first_id || rows.at(-1)?.id !== record.last_id) {
    throw damaged(record.file, `it holds ${rows.length} events, not the ${record.rows} recorded`);
  }
  return rows;
}
