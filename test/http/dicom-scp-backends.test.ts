/**
 * mia's SCP on either backend (the postgres project runs this file again on PostgreSQL): C-STOREs
 * from several associations at once are indexed through one commit queue, each association's
 * instances under its own import job, each answered once committed.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseDicom } from '#server/dicom/parse.ts';
import { dicomStore } from '#server/dimse/scu.ts';
import { CT_SMALL } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let work: string;
const FILES_PER_ASSOCIATION = 6;
const ASSOCIATIONS = 3;

/** CT_small again under another SOP Instance UID of the same length (meta and data set alike). */
function copyWithUid(original: Buffer, uid: string, n: number): Buffer {
  const suffix = String(n).padStart(4, '0');
  const other = uid.slice(0, uid.length - suffix.length) + suffix;
  const from = Buffer.from(uid, 'latin1');
  const to = Buffer.from(other, 'latin1');
  const out = Buffer.from(original);
  for (let at = out.indexOf(from); at >= 0; at = out.indexOf(from, at + 1)) to.copy(out, at);
  return out;
}

beforeAll(async () => {
  t = await startTestServer({ dicom: { port: 0, host: '127.0.0.1', aeTitle: 'MIA', allow: [{ aeTitle: 'MODALITY', host: 'localhost' }] } });
  work = mkdtempSync(join(tmpdir(), 'mia-scp-backends-'));
});

afterAll(async () => {
  await t.close();
  rmSync(work, { recursive: true, force: true });
});

describe('C-STORE into mia on this backend', () => {
  it('stores what several associations send at once, each under its own import job', async () => {
    const original = readFileSync(CT_SMALL);
    const parsed = parseDicom(original);
    if (!parsed.ok) throw new Error(parsed.reason);
    const batches = Array.from({ length: ASSOCIATIONS }, (_, a) =>
      Array.from({ length: FILES_PER_ASSOCIATION }, (_, i) => {
        const file = join(work, `a${a}-${i}.dcm`);
        writeFileSync(file, copyWithUid(original, parsed.instance.sopInstanceUid, a * 100 + i + 1));
        return file;
      }),
    );
    const listener = t.server.runtime.dicomListener();
    if (!listener) throw new Error('no DICOM listener');
    const peer = { host: '127.0.0.1', port: listener.port, calledAeTitle: 'MIA', callingAeTitle: 'MODALITY' };
    const results = await Promise.all(batches.map((files) => dicomStore(peer, files)));
    for (const r of results.flat()) expect(r.outcome, JSON.stringify(r)).toBe('stored');

    const instances = await t.request('GET', `/v1/scans/${parsed.instance.seriesInstanceUid}/instances?limit=100`);
    expect(instances.status, instances.text).toBe(200);
    expect(instances.json.data.items).toHaveLength(ASSOCIATIONS * FILES_PER_ASSOCIATION);
    const jobs = await t.request('GET', '/v1/imports?limit=100');
    const fromScp = jobs.json.data.items.filter((j: { sources: string[] }) => j.sources[0] === 'dicom:MODALITY@127.0.0.1');
    expect(fromScp).toHaveLength(ASSOCIATIONS);
    for (const job of fromScp) expect(job).toMatchObject({ status: 'completed', counts: { imported: FILES_PER_ASSOCIATION } });
  });
});
