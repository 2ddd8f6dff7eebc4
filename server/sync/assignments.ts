/**
 * Taking work offline (docs/sync.md, Assignment): a hub admin gives a study to a workstation,
 * optionally naming the reader it is for; the workstation learns of it at its next round and
 * fetches the study's files, so the study (with its analyses, verdicts and reports, which the
 * pull already brought and which waited for it) can be read without the network.
 *
 * What a workstation holds of a study it was not given stays as it was: instance changes of other
 * studies wait in its inbox, naming files it does not have, until they are assigned to it.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { z } from 'zod';
import { conflict, notFound } from '#server/errors.ts';
import type { Clock } from '#server/clock.ts';
import type { Database } from '#server/store/database.ts';
import { assignStudy, findAssignment, listDeviceAssignments, listStudyFiles, removeAssignment, studyExists, studyFileStamps, type AssignmentRow } from '#server/store/assignments.ts';
import { findDeviceById } from '#server/store/devices.ts';
import { findUserByPublicId } from '#server/store/users.ts';
import { hasBlob, receiveBlob, SHA256_PATTERN } from '#server/sync/blobs.ts';

/** At most this many studies travel to one workstation, and this many files of one study. */
export const MAX_ASSIGNED_STUDIES = 500;
export const MAX_STUDY_FILES = 100_000;

export const assignment = z.object({
  id: z.string(),
  study_uid: z.string(),
  device_id: z.string(),
  device_name: z.string(),
  reader_id: z.string().nullable(),
  assigned_by: z.string(),
  created_at: z.string(),
});
export type Assignment = z.output<typeof assignment>;

export const assignBody = z.object({
  study_uid: z.string().min(1).max(64).regex(/^[0-9.]+$/, 'a DICOM UID'),
  device_id: z.string().min(1).max(64),
  reader_id: z.string().regex(/^usr_[0-9a-f]{24}$/, 'a usr_ id').optional(),
}).strict();
export const assignmentParams = z.object({ id: z.string().regex(/^asg_[0-9a-f]{24}$/, 'an asg_ id') });

export const assignedResponse = z.object({
  studies: z.array(z.object({
    study_uid: z.string(),
    reader_id: z.string().nullable(),
    files: z.array(z.object({ sha256: z.string().regex(SHA256_PATTERN), bytes: z.number().int().min(1) })),
  })),
  /**
   * What this answer was made of (the assignments and their studies' files). Sent back as
   * `known`, it gets `unchanged` and no studies while it still holds. Absent from older hubs.
   */
  version: z.string().max(64).optional(),
  unchanged: z.boolean().optional(),
});
export type Assigned = z.output<typeof assignedResponse>;

export function toAssignment(row: AssignmentRow): Assignment {
  return { id: row.public_id, study_uid: row.study_uid, device_id: row.device_id, device_name: row.device_name, reader_id: row.reader_id, assigned_by: row.assigned_by, created_at: row.created_at };
}

export async function assign(deps: { db: Database; clock: Clock }, input: z.output<typeof assignBody>, by: string): Promise<Assignment> {
  if (!(await studyExists(deps.db, input.study_uid))) throw notFound('Study', input.study_uid);
  const device = await findDeviceById(deps.db, input.device_id);
  if (!device) throw notFound('Device', input.device_id);
  if (device.revoked_at) throw conflict('This workstation was revoked', `device ${device.device_id} was revoked at ${device.revoked_at}; enroll it again first`);
  if (input.reader_id !== undefined && !(await findUserByPublicId(deps.db, input.reader_id))) throw notFound('User', input.reader_id);
  return toAssignment(await assignStudy(deps.db, { study_uid: input.study_uid, device_ref: device.id, reader_id: input.reader_id ?? null, assigned_by: by, at: deps.clock.now().toISOString() }));
}

export async function unassign(deps: { db: Database; clock: Clock }, id: string): Promise<Assignment> {
  const row = await findAssignment(deps.db, id);
  if (!row || row.removed_at) throw notFound('Assignment', id);
  await removeAssignment(deps.db, row.id, deps.clock.now().toISOString());
  return toAssignment(row);
}

export const assignedQuery = z.object({ known: z.string().regex(/^[0-9a-f]{32}$/, 'a version from an earlier answer').optional() }).strict();

/**
 * The hub's answer to a workstation: its studies and the files each is made of, or `unchanged`
 * when they are still what the workstation `known`s. A workstation asks every round (10 s); its
 * studies' file lists ran to 100,000 files (MBs of JSON, and as many checks there) each time.
 */
export async function assignedTo(db: Database, deviceRef: number, known?: string): Promise<Assigned> {
  const rows = await listDeviceAssignments(db, deviceRef, MAX_ASSIGNED_STUDIES);
  const stamps = await studyFileStamps(db, rows.map((r) => r.study_uid));
  const digest = createHash('sha256');
  for (const row of rows) {
    const stamp = stamps.get(row.study_uid);
    digest.update(`${row.public_id}\t${row.study_uid}\t${row.reader_id ?? ''}\t${stamp?.last ?? 0}\t${stamp?.count ?? 0}\n`);
  }
  const version = digest.digest('hex').slice(0, 32);
  if (known === version) return { studies: [], version, unchanged: true };
  const studies: Assigned['studies'] = [];
  for (const row of rows) studies.push({ study_uid: row.study_uid, reader_id: row.reader_id, files: await listStudyFiles(db, row.study_uid, MAX_STUDY_FILES) });
  return { studies, version };
}

/**
 * The workstation's side: fetches each file of its assigned studies that it does not hold, each
 * checked against its digest as it is written (a file that does not match is not kept).
 */
export async function fetchAssignedFiles(
  dataDir: string,
  assigned: Assigned,
  download: (sha256: string, bytes: number) => Promise<Response>,
  onFile: (sha256: string, bytes: number) => void,
): Promise<number> {
  let fetched = 0;
  const wanted = new Map<string, number>();
  for (const study of assigned.studies) for (const f of study.files) if (!hasBlob(dataDir, f.sha256)) wanted.set(f.sha256, f.bytes);
  for (const [sha256, bytes] of wanted) {
    const res = await download(sha256, bytes);
    if (!res.ok || !res.body) throw new Error(`file ${sha256}: the hub answered ${res.status}`);
    await receiveBlob(dataDir, sha256, Readable.fromWeb(res.body as WebReadableStream<Uint8Array>), bytes);
    fetched += 1;
    onFile(sha256, bytes);
  }
  return fetched;
}
