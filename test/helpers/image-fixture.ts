/**
 * Puts a real DICOM file into a test server's archive and index synchronously, through the same
 * commit code the importer uses, for tests that need an imported instance but are not about
 * importing (route tables, auth matrix).
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { parseDicom } from '#server/dicom/parse.ts';
import { archivePathFor } from '#server/imports/archive.ts';
import { createImportJob } from '#server/imports/import-job.ts';
import { commitBatch } from '#server/imports/ingest.ts';
import { finishImportJob } from '#server/store/import-jobs.ts';
import type { TestServer } from './server.ts';

export const PYDICOM_CORPUS = '/usr/lib/python3/dist-packages/pydicom/data/test_files';
export const CT_SMALL = `${PYDICOM_CORPUS}/CT_small.dcm`;

export type SeededInstance = { instanceUid: string; scanId: string; jobId: string; studyUid: string };

export async function seedImportedInstance(t: TestServer, file = CT_SMALL): Promise<SeededInstance> {
  const { db, clock, dataDir, node, replica } = t.server.services;
  const bytes = readFileSync(file);
  const parsed = parseDicom(new Uint8Array(bytes));
  if (!parsed.ok) throw new Error(`fixture ${file} does not parse: ${parsed.reason}`);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  const archivePath = archivePathFor(sha256);
  mkdirSync(dirname(join(dataDir, archivePath)), { recursive: true });
  writeFileSync(join(dataDir, archivePath), bytes);
  const job = await createImportJob({ db, clock, dataDir, node }, 'upload', ['fixture'], 'test');
  await commitBatch(db, replica, job.id, [{ kind: 'store', path: file, instance: parsed.instance, sha256, archivePath, bytes: bytes.length }], clock.now().toISOString());
  await finishImportJob(db, job.id, 'completed', null, clock.now().toISOString());
  return { instanceUid: parsed.instance.sopInstanceUid, scanId: parsed.instance.seriesInstanceUid, jobId: job.public_id, studyUid: parsed.instance.studyInstanceUid };
}

/** A folder holding one copy of a corpus file, for POST /v1/imports. */
export function fixtureFolder(file = CT_SMALL): string {
  const dir = mkdtempSync(join(tmpdir(), 'mia-import-src-'));
  copyFileSync(file, join(dir, 'image.dcm'));
  return dir;
}
