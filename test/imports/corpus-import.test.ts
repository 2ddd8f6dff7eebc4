/**
 * pydicom's test corpus through both import doors (POST /v1/imports and `mia import`): every
 * image file is imported with pydicom's rows, columns, frames, modality and UIDs, or accounted
 * for as a conflict or a rejection with a plain reason; counts add up; re-import is duplicates.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findInstance } from '#server/store/instances.ts';
import { CORPUS, corpusFiles, requirePydicom, runPydicom, type PydicomMeta } from '../dicom/helpers/reference.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { followJob, runMia } from './helpers.ts';

const PLAIN_REASON = /^(not a DICOM file|truncated at byte \d+|missing [A-Za-z ]+|no pixel data \(not an image\)|a DICOMDIR media directory, not an instance|unsupported transfer syntax|bad file meta information|SOP Instance UID [0-9.]+ is already stored with different content)/;

let t: TestServer;
let reference: Map<string, PydicomMeta>;
/** What the walk sees: every corpus file except those named DICOMDIR (the disc's index). */
const files = corpusFiles().filter((f) => basename(f).toUpperCase() !== 'DICOMDIR');
let job: any;
let events: Array<{ event: string; data: any }> = [];

beforeAll(async () => {
  requirePydicom();
  reference = new Map(runPydicom<PydicomMeta[]>(['meta', ...files]).map((r) => [r.file, r]));
  t = await startTestServer();
  const started = await t.request('POST', '/v1/imports', { body: { path: CORPUS } });
  expect(started.status, started.text).toBe(202);
  expect(started.json.data.status).toBe('running');
  events = await followJob(t, started.json.data.id);
  job = (await t.request('GET', `/v1/imports/${started.json.data.id}`)).json.data;
});
afterAll(async () => {
  await t.close();
});

describe('import of the pydicom corpus over HTTP', () => {
  it('completes with counts that add up', () => {
    expect(job.status).toBe('completed');
    const c = job.counts;
    expect(c.files_total).toBe(files.length);
    expect(c.files_seen).toBe(files.length);
    expect(c.imported + c.duplicates + c.conflicts + c.rejected).toBe(c.files_seen);
    expect(c.imported).toBeGreaterThan(40);
    expect(job.rejects_total).toBe(c.rejected + c.conflicts);
    expect(job.rejects).toHaveLength(c.rejected + c.conflicts);
  });

  it('streams progress, one reject event per rejected file, then done', () => {
    expect(events.at(-1)?.event).toBe('done');
    expect(events.at(-1)?.data.status).toBe('completed');
    expect(events.some((e) => e.event === 'progress')).toBe(true);
    expect(events.filter((e) => e.event === 'reject').map((e) => e.data.path).sort()).toEqual(job.rejects.map((r: any) => r.path).sort());
  });

  it('gives every rejected file a plain reason', () => {
    for (const r of job.rejects) expect(r.reason, r.path).toMatch(PLAIN_REASON);
  });

  it('imports every image pydicom reads, with pydicom\'s geometry and identity', async () => {
    const rejected = new Map<string, any>(job.rejects.map((r: any) => [r.path, r]));
    const db = t.server.services.db;
    let checked = 0;
    for (const file of files) {
      const ref = reference.get(file)!;
      const reject = rejected.get(file);
      const isImage = !ref.error && ref.hasPixelData && ref.sopInstanceUid;
      if (reject?.outcome === 'conflict') {
        // Same SOP Instance UID as an earlier file with other bytes: the first one is stored.
        expect(await findInstance(db, ref.sopInstanceUid!), file).toBeDefined();
        continue;
      }
      if (reject) {
        // Only files pydicom cannot read as an image, or whose pixels cannot be shown, are refused.
        if (isImage) expect(reject.reason, file).toMatch(/^(unsupported transfer syntax|truncated|missing)/);
        continue;
      }
      expect(isImage, `${file} imported but pydicom sees no image`).toBeTruthy();
      const row = await findInstance(db, ref.sopInstanceUid!);
      expect(row, file).toBeDefined();
      expect({
        rows: row!.rows,
        columns: row!.columns,
        frames: row!.frames,
        modality: row!.modality,
        scan: row!.scan_id,
        study: ((await db.get('SELECT st.study_uid FROM studies st JOIN scans s ON s.study_ref = st.id WHERE s.scan_id = ?', [row!.scan_id])) as { study_uid: string }).study_uid,
      }, file).toEqual({
        rows: ref.rows,
        columns: ref.columns,
        frames: ref.numberOfFrames ?? 1,
        modality: ref.modality || 'OT',
        scan: ref.seriesInstanceUid,
        study: ref.studyInstanceUid,
      });
      checked++;
    }
    expect(checked).toBe(job.counts.imported + job.counts.duplicates);
  });

  it('lists the imported scans with status received', async () => {
    const scans = await t.request('GET', '/v1/scans?limit=500');
    expect(scans.json.data.items.length).toBeGreaterThan(10);
    for (const s of scans.json.data.items) expect(s.status).toBe('received');
  });

  it('a second import of the same folder finds only duplicates (and the same conflicts and rejects)', async () => {
    const again = await t.request('POST', '/v1/imports', { body: { path: CORPUS } });
    await followJob(t, again.json.data.id);
    const second = (await t.request('GET', `/v1/imports/${again.json.data.id}`)).json.data;
    expect(second.counts.imported).toBe(0);
    expect(second.counts.duplicates).toBe(job.counts.imported + job.counts.duplicates);
    expect(second.counts.rejected).toBe(job.counts.rejected);
    expect(second.counts.conflicts).toBe(job.counts.conflicts);
    const list = await t.request('GET', '/v1/imports');
    expect(list.json.data.items.map((j: any) => j.id).slice(0, 2)).toEqual([again.json.data.id, job.id]);
  });

  it('refuses a path that does not exist, and a relative one', async () => {
    expect((await t.request('POST', '/v1/imports', { body: { path: '/no/such/folder' } })).status).toBe(404);
    const relative = await t.request('POST', '/v1/imports', { body: { path: 'relative/folder' } });
    expect(relative.status).toBe(400);
    expect(relative.json.error.details).toMatch(/^path: /);
  });
});

describe('mia import of the pydicom corpus', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'mia-cli-import-'));
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

  it('imports the same as the HTTP job, prints a summary, exits 1 because files were rejected', () => {
    const run = runMia(['import', CORPUS], dataDir);
    expect(run.status, run.stderr).toBe(1);
    expect(run.stdout).toMatch(/JOB\s+STATUS\s+FILES\s+IMPORTED\s+DUPLICATES\s+CONFLICTS\s+REJECTED/);
    const row = new RegExp(`(imp_[0-9a-f]{24})\\s+completed\\s+${files.length}\\s+${job.counts.imported}\\s+${job.counts.duplicates}\\s+${job.counts.conflicts}\\s+${job.counts.rejected}\\b`);
    expect(run.stdout).toMatch(row);
    expect(run.stdout).toContain('not a DICOM file');
    // Not a TTY here: plain progress lines, no carriage returns.
    expect(run.stderr).toMatch(/files, [\d.]+ MB/);
    expect(run.stderr).not.toContain('\r');
  });

  it('exits 0 for a folder of good images, and re-running finds duplicates only', () => {
    const good = join(CORPUS, 'dicomdirtests', '77654033');
    const first = runMia(['import', good], dataDir);
    expect(first.status, first.stdout + first.stderr).toBe(0);
    const again = runMia(['import', good], dataDir);
    expect(again.status).toBe(0);
    expect(again.stdout).toMatch(/completed\s+(\d+)\s+0\s+\1\s+0\s+0/);
  });
});
