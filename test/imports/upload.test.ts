/** Uploads over HTTP (application/dicom and multipart/related), hub mode, the watch folder. */
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CORPUS } from '../dicom/helpers/reference.ts';
import { CT_SMALL, fixtureFolder } from '../helpers/image-fixture.ts';
import { dataSetStart, parseDicom } from '#server/dicom/parse.ts';
import { encodeFileMeta } from '#server/dimse/part10.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const MR_SMALL = join(CORPUS, 'MR_small.dcm');

/** What uploads spooled and left: multipart folders, and single bodies in the archive's staging folder (files at any depth: staged files have folders of their own there). */
function spooled(dataDir: string): string[] {
  const list = (dir: string, depth: number): string[] => {
    try {
      return readdirSync(join(dataDir, dir), { withFileTypes: true }).flatMap((entry) =>
        entry.isDirectory() && depth > 0 ? list(join(dir, entry.name), depth - 1) : [join(dir, entry.name)],
      );
    } catch {
      return [];
    }
  };
  return [...list(join('tmp', 'uploads'), 0), ...list(join('archive', '.staging'), 1)];
}
const BOUNDARY = 'mia-test-boundary-42';

function multipart(parts: Array<{ type: string; body: Buffer }>): Buffer {
  const chunks: Buffer[] = [Buffer.from('preamble to ignore\r\n')];
  for (const part of parts) chunks.push(Buffer.from(`--${BOUNDARY}\r\nContent-Type: ${part.type}\r\n\r\n`), part.body, Buffer.from('\r\n'));
  chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(chunks);
}
const MULTIPART = `multipart/related; type="application/dicom"; boundary=${BOUNDARY}`;

function archiveFiles(dataDir: string): string[] {
  const out: string[] = [];
  const walk = (dir: string): void => {
    let names: string[] = [];
    try {
      names = readdirSync(dir, { withFileTypes: true }).map((d) => (d.isDirectory() ? `${d.name}/` : d.name));
    } catch {
      return;
    }
    for (const name of names) {
      if (name.endsWith('/')) walk(join(dir, name));
      else out.push(join(dir, name));
    }
  };
  walk(join(dataDir, 'archive'));
  return out;
}

let t: TestServer;
beforeAll(async () => {
  t = await startTestServer();
});
afterAll(async () => {
  await t.close();
});

const instanceCount = async (): Promise<number> => ((await t.server.services.db.get('SELECT COUNT(*) AS n FROM instances')) as { n: number }).n;

describe('POST /v1/instances', () => {
  it('stores one application/dicom instance, then reports it as a duplicate', async () => {
    const first = await t.request('POST', '/v1/instances', { rawBody: readFileSync(CT_SMALL), headers: { 'Content-Type': 'application/dicom' } });
    expect(first.status, first.text).toBe(200);
    expect(first.json.data.outcomes).toEqual([
      { part: 1, outcome: 'imported', sop_instance_uid: expect.stringMatching(/^[0-9.]+$/), scan_id: expect.any(String), reason: null },
    ]);
    const scan = await t.request('GET', `/v1/scans/${first.json.data.outcomes[0].scan_id}`);
    expect(scan.json.data).toMatchObject({ status: 'received', modality: 'CT', instance_count: 1 });
    const again = await t.request('POST', '/v1/instances', { rawBody: readFileSync(CT_SMALL), headers: { 'Content-Type': 'application/dicom' } });
    expect(again.json.data.outcomes[0].outcome).toBe('duplicate');
    const job = await t.request('GET', `/v1/imports/${again.json.data.job_id}`);
    expect(job.json.data).toMatchObject({ kind: 'upload', status: 'completed', counts: { files_seen: 1, duplicates: 1 } });
  });

  it('takes the same data set under another file header (another route, another writer) as a duplicate; other content stays a conflict', async () => {
    const original = readFileSync(join(CORPUS, 'SC_rgb_dcmtk_+eb+cy+np.dcm'));
    const start = dataSetStart(original) ?? 0;
    const parsed = parseDicom(original);
    if (!parsed.ok) throw new Error(parsed.reason);
    const { sopClassUid, sopInstanceUid, transferSyntaxUid } = parsed.instance;
    const rewrapped = Buffer.concat([encodeFileMeta({ sopClassUid, sopInstanceUid, transferSyntaxUid, sourceAeTitle: 'OTHERPACS' }), original.subarray(start)]);
    expect(rewrapped.equals(original)).toBe(false);
    const send = (body: Buffer) => t.request('POST', '/v1/instances', { rawBody: body, headers: { 'Content-Type': 'application/dicom' } });
    expect((await send(original)).json.data.outcomes[0].outcome).toBe('imported');
    expect((await send(rewrapped)).json.data.outcomes[0].outcome).toBe('duplicate');
    // One byte of the data set changed (a pixel sample): the first copy is kept.
    const altered = Buffer.from(rewrapped);
    altered[altered.length - 100] = (altered[altered.length - 100] ?? 0) ^ 0xff;
    const conflict = await send(altered);
    expect(conflict.status, conflict.text).toBe(409);
  });

  it('answers 422 with the reason for a body that is not DICOM, and stores nothing', async () => {
    const before = { instances: await instanceCount(), files: archiveFiles(t.dataDir).length };
    const reply = await t.request('POST', '/v1/instances', { rawBody: Buffer.from('this is a text file, not an image\n'.repeat(20)), headers: { 'Content-Type': 'application/dicom' } });
    expect(reply.status).toBe(422);
    expect(reply.json.status).toBe('error');
    expect(reply.json.error).toMatchObject({ code: 422, details: 'not a DICOM file' });
    const truncated = readFileSync(join(CORPUS, 'MR_truncated.dcm'));
    const cut = await t.request('POST', '/v1/instances', { rawBody: truncated, headers: { 'Content-Type': 'application/dicom' } });
    expect(cut.status).toBe(422);
    expect(cut.json.error.details).toMatch(/^truncated at byte \d+/);
    expect({ instances: await instanceCount(), files: archiveFiles(t.dataDir).length }).toEqual(before);
    // Upload temp files are gone too (a single body is spooled in the archive's staging folder).
    expect(spooled(t.dataDir)).toEqual([]);
  });

  it('keeps nothing of a single body whose client goes away mid-transfer, and stores the next', async () => {
    const bytes = readFileSync(CT_SMALL);
    const { hostname, port } = new URL(t.url);
    await new Promise<void>((resolve) => {
      const req = httpRequest({ hostname, port, method: 'POST', path: '/v1/instances', headers: { Authorization: `Bearer ${t.adminKey}`, 'Content-Type': 'application/dicom', 'Content-Length': String(bytes.length) } });
      req.on('error', () => resolve());
      req.on('close', () => resolve());
      req.write(bytes.subarray(0, bytes.length >> 1), () => setTimeout(() => req.destroy(), 100));
    });
    await expect.poll(() => spooled(t.dataDir), { timeout: 10_000 }).toEqual([]);
    const whole = await t.request('POST', '/v1/instances', { rawBody: bytes, headers: { 'Content-Type': 'application/dicom' } });
    expect(whole.status).toBe(200);
    expect(whole.json.data.outcomes.map((o: { outcome: string }) => o.outcome)).toEqual([expect.stringMatching(/^(imported|duplicate)$/)]);
    expect(spooled(t.dataDir)).toEqual([]);
  });

  it('takes multipart/related with good and bad parts: 200 with an outcome per part', async () => {
    const body = multipart([
      { type: 'application/dicom', body: readFileSync(MR_SMALL) },
      { type: 'application/dicom', body: Buffer.from('garbage') },
      { type: 'application/json', body: Buffer.from('{}') },
      { type: 'application/dicom', body: readFileSync(join(CORPUS, 'JPEG2000.dcm')) },
    ]);
    const reply = await t.request('POST', '/v1/instances', { rawBody: body, headers: { 'Content-Type': MULTIPART } });
    expect(reply.status, reply.text).toBe(200);
    expect(reply.json.data.outcomes.map((o: any) => [o.part, o.outcome, o.reason])).toEqual([
      [1, 'imported', null],
      [2, 'rejected', 'not a DICOM file'],
      [3, 'rejected', 'part is application/json, not application/dicom'],
      [4, 'imported', null],
    ]);
    expect(reply.json.data.counts).toMatchObject({ files_seen: 3, imported: 2, rejected: 1 });
    // The bytes stored are exactly the part's bytes.
    const stored = (await t.server.services.db.get('SELECT file_size FROM instances WHERE sop_instance_uid = ?', [reply.json.data.outcomes[0].sop_instance_uid])) as { file_size: number };
    expect(stored.file_size).toBe(readFileSync(MR_SMALL).length);
  });

  it('answers 422 for a multipart body where nothing could be stored', async () => {
    const reply = await t.request('POST', '/v1/instances', {
      rawBody: multipart([{ type: 'application/dicom', body: Buffer.from('nope') }, { type: 'application/dicom', body: Buffer.alloc(0) }]),
      headers: { 'Content-Type': MULTIPART },
    });
    expect(reply.status).toBe(422);
    expect(reply.json.error.details).toBe('part 1: not a DICOM file; part 2: empty file');
  });

  it('refuses other body types (415), a multipart body without boundary (400) or cut short (400), and bodies declared too large (413)', async () => {
    expect((await t.request('POST', '/v1/instances', { body: { file: 'x' } })).status).toBe(415);
    expect((await t.request('POST', '/v1/instances', { rawBody: Buffer.from('x'), headers: { 'Content-Type': 'multipart/related' } })).status).toBe(400);
    const cut = multipart([{ type: 'application/dicom', body: readFileSync(CT_SMALL) }]).subarray(0, 3000);
    expect((await t.request('POST', '/v1/instances', { rawBody: cut, headers: { 'Content-Type': MULTIPART } })).status).toBe(400);
    const big = await t.request('POST', '/v1/instances', { headers: { 'Content-Type': 'application/dicom', 'Content-Length': String(3 * 1024 ** 3) }, rawBody: Buffer.alloc(0) });
    expect(big.status).toBe(413);
    expect(big.json.error.details).toBe(`body: at most ${2 * 1024 ** 3} bytes`);
  });

  it('needs write:scans', async () => {
    const reader = await t.keyFor('radiologist');
    const reply = await t.request('POST', '/v1/instances', { key: reader.key, rawBody: readFileSync(CT_SMALL), headers: { 'Content-Type': 'application/dicom' } });
    expect(reply.status).toBe(403);
    expect(reply.json.error.details).toBe('required scope: write:scans');
  });
});

describe('hub mode', () => {
  it('refuses POST /v1/imports with a clear error but accepts uploads', async () => {
    const hub = await startTestServer({ hubMode: true });
    try {
      const reply = await hub.request('POST', '/v1/imports', { body: { path: fixtureFolder() } });
      expect(reply.status).toBe(403);
      expect(reply.json.error.message).toMatch(/disabled on a hub/);
      expect(reply.json.error.details).toMatch(/POST \/v1\/instances/);
      const upload = await hub.request('POST', '/v1/instances', { rawBody: readFileSync(CT_SMALL), headers: { 'Content-Type': 'application/dicom' } });
      expect(upload.status).toBe(200);
    } finally {
      await hub.close();
    }
  });
});

describe('watch folder', () => {
  it('imports a file once it has been stable, once, and again when dropped in again', async () => {
    const watchDir = mkdtempSync(join(tmpdir(), 'mia-watch-'));
    const w = await startTestServer({ watchDir, watchStableMs: 300 });
    try {
      const file = join(watchDir, 'ct.dcm');
      // A whole second, so a copy can be given the very same time again below.
      const time = new Date('2026-01-02T03:04:05Z');
      copyFileSync(CT_SMALL, file);
      utimesSync(file, time, time);
      let jobs: any[] = [];
      for (let i = 0; i < 100 && !jobs.some((j) => j.status === 'completed'); i++) {
        await new Promise((r) => setTimeout(r, 100));
        jobs = (await w.request('GET', '/v1/imports')).json.data.items;
      }
      expect(jobs).toHaveLength(1);
      expect(jobs[0]).toMatchObject({ kind: 'watch', status: 'completed', counts: { imported: 1 } });
      await new Promise((r) => setTimeout(r, 800));
      expect((await w.request('GET', '/v1/imports')).json.data.items).toHaveLength(1);

      // Taken out and dropped in again, even with its old size and time: imported again (the
      // archive knows it already), as a technologist sending it twice would expect.
      rmSync(file);
      // Another file imported after the removal: a look at the folder without ct.dcm has happened.
      copyFileSync(CT_SMALL, join(watchDir, 'other.dcm'));
      for (let i = 0; i < 100 && jobs.length < 2; i++) {
        await new Promise((r) => setTimeout(r, 100));
        jobs = (await w.request('GET', '/v1/imports')).json.data.items;
      }
      expect(jobs).toHaveLength(2);
      copyFileSync(CT_SMALL, file);
      utimesSync(file, time, time);
      for (let i = 0; i < 100 && jobs.length < 3; i++) {
        await new Promise((r) => setTimeout(r, 100));
        jobs = (await w.request('GET', '/v1/imports')).json.data.items;
      }
      expect(jobs).toHaveLength(3);
    } finally {
      await w.close();
      rmSync(watchDir, { recursive: true, force: true });
    }
  });
  it('backs off while imports keep failing, then imports once storage works again', async () => {
    const watchDir = mkdtempSync(join(tmpdir(), 'mia-watch-'));
    const w = await startTestServer({ watchDir, watchStableMs: 200 });
    const staging = join(w.dataDir, 'archive', '.staging');
    try {
      // Storage that fails every write: the archive's staging folder is a file.
      rmSync(staging, { recursive: true, force: true });
      mkdirSync(join(w.dataDir, 'archive'), { recursive: true });
      writeFileSync(staging, 'not a folder');
      copyFileSync(CT_SMALL, join(watchDir, 'ct.dcm'));
      const jobs = async (): Promise<{ status: string }[]> => (await w.request('GET', '/v1/imports')).json.data.items;
      // The first job is listed while it runs; it fails once its file cannot be staged.
      let seen: { status: string }[] = [];
      for (let i = 0; i < 100 && !seen.some((j) => j.status !== 'queued' && j.status !== 'running'); i++) {
        await new Promise((r) => setTimeout(r, 50));
        seen = await jobs();
      }
      expect(seen.map((j) => j.status)).toContain('failed');
      expect(seen.map((j) => j.status)).not.toContain('completed');
      await new Promise((r) => setTimeout(r, 3000));
      // A look every 100 ms made ~25 failed jobs in these 3 s; the doubling waits make at most 5.
      const failed = (await jobs()).filter((j) => j.status === 'failed').length;
      expect(failed).toBeLessThanOrEqual(5);

      rmSync(staging);
      let completed = false;
      for (let i = 0; i < 200 && !completed; i++) {
        await new Promise((r) => setTimeout(r, 100));
        completed = (await jobs()).some((j) => j.status === 'completed');
      }
      expect(completed).toBe(true);
    } finally {
      await w.close();
      rmSync(watchDir, { recursive: true, force: true });
    }
  });
});
