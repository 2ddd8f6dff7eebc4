/**
 * C-STORE into mia on a full data disk (issue 14): the data folder is a small tmpfs filled to its
 * last byte. storescu is answered A700 (out of resources) and nothing is indexed or left in the
 * spool; once space is freed the same file is stored. The SCP stays up throughout.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type MiaServer } from '#server/create-server.ts';
import { CT_SMALL } from '../helpers/image-fixture.ts';
import { freePort } from '../helpers/orthanc.ts';
import { fillDisk, run as runAsRoot } from '../faults/serve-process.ts';
import { run, spooledFiles } from './dimse-harness.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-dimse-full-'));
const dataDir = join(work, 'data');
let unavailable: string | null = null;
let server: MiaServer | undefined;
let port = 0;

async function instanceCount(): Promise<number> {
  const row = await server?.services.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM instances');
  return Number(row?.n ?? 0);
}

const store = async (): Promise<{ status: number | null; output: string }> => {
  const sent = await run('storescu', ['-v', '-aet', 'STORESCU', '-aec', 'MIA', '-R', '127.0.0.1', String(port), CT_SMALL]);
  return { status: sent.status, output: sent.stdout + sent.stderr };
};

beforeAll(async () => {
  runAsRoot('mkdir', ['-p', dataDir]);
  unavailable = runAsRoot('mount', ['-t', 'tmpfs', '-o', 'size=24m,mode=0700', 'tmpfs', dataDir]);
  if (unavailable) return;
  port = await freePort();
  server = await createServer({ dataDir, dicom: { port, host: '127.0.0.1', aeTitle: 'MIA', allow: [{ aeTitle: 'STORESCU', host: '127.0.0.1' }] } });
});

afterAll(async () => {
  await server?.close();
  if (!unavailable) runAsRoot('umount', [dataDir]);
  rmSync(work, { recursive: true, force: true });
});

describe('C-STORE on a full data disk', () => {
  it('answers A700 while the disk is full, stores nothing, and stores once space is back', async (context) => {
    if (unavailable) context.skip(`needs a tmpfs as the data folder: ${unavailable}`);
    const filler = join(dataDir, 'filler');
    fillDisk(filler);
    const refused = await store();
    expect(refused.output).toMatch(/Received Store Response \(Refused: OutOfResources\)/);
    expect(await instanceCount()).toBe(0);
    expect(spooledFiles(dataDir)).toEqual([]);

    rmSync(filler);
    const stored = await store();
    expect(stored.status, stored.output).toBe(0);
    expect(stored.output).toMatch(/Received Store Response \(Success\)/);
    expect(await instanceCount()).toBe(1);
  });
});
