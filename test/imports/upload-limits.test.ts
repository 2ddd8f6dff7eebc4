/**
 * Limits on one upload (issue 10, defect 7e): a multipart body may hold at most
 * httpLimits.maxUploadParts parts; beyond that it is 413 before more files are written, parsed
 * or recorded, so 20,000 empty parts cost neither 20,000 reject rows nor seconds of work.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_LIMITS } from '#server/config.ts';
import { CT_SMALL } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const BOUNDARY = 'mia-parts-7e';
const MULTIPART = `multipart/related; type="application/dicom"; boundary=${BOUNDARY}`;

function multipart(bodies: readonly Buffer[]): Buffer {
  const chunks: Buffer[] = [];
  for (const body of bodies) chunks.push(Buffer.from(`--${BOUNDARY}\r\nContent-Type: application/dicom\r\n\r\n`), body, Buffer.from('\r\n'));
  chunks.push(Buffer.from(`--${BOUNDARY}--\r\n`));
  return Buffer.concat(chunks);
}

/** Parts without headers or content: the cheapest part a client can send. */
function emptyParts(count: number): Buffer {
  return Buffer.from(`--${BOUNDARY}\r\n\r\n` + `\r\n--${BOUNDARY}\r\n\r\n`.repeat(count - 1) + `\r\n--${BOUNDARY}--\r\n`);
}

const count = async (t: TestServer, table: string): Promise<number> => ((await t.server.services.db.get(`SELECT COUNT(*) AS n FROM ${table}`)) as { n: number }).n;
const spooled = (t: TestServer): string[] => {
  try {
    return readdirSync(join(t.dataDir, 'tmp', 'uploads'));
  } catch {
    return [];
  }
};

describe('parts per upload, default limit', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => {
    await t.close();
  });

  it('20,000 empty parts: 413 naming the limit, no job, no reject rows, nothing left spooled', async () => {
    expect(DEFAULT_HTTP_LIMITS.maxUploadParts).toBe(1_000);
    const reply = await t.request('POST', '/v1/instances', { rawBody: emptyParts(20_000), headers: { 'Content-Type': MULTIPART } });
    expect(reply.status).toBe(413);
    expect(reply.json.error).toMatchObject({ message: 'Too many parts in one upload', details: 'body: at most 1000 parts per request; send the rest in further requests' });
    expect(await count(t, 'import_rejects')).toBeLessThanOrEqual(DEFAULT_HTTP_LIMITS.maxUploadParts);
    expect(await count(t, 'import_rejects')).toBe(0);
    expect(await count(t, 'import_jobs')).toBe(0);
    await expect.poll(() => spooled(t), { timeout: 10_000 }).toEqual([]);
    expect((await t.request('GET', '/v1/auth/me')).status).toBe(200);
  });
});

describe('parts per upload, a limit of 3', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ httpLimits: { ...DEFAULT_HTTP_LIMITS, maxUploadParts: 3 } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('3 parts are imported; 4 are refused whole, nothing stored', async () => {
    const ct = readFileSync(CT_SMALL);
    const four = await t.request('POST', '/v1/instances', { rawBody: multipart([ct, ct, Buffer.alloc(0), ct]), headers: { 'Content-Type': MULTIPART } });
    expect(four.status).toBe(413);
    expect(four.json.error.details).toBe('body: at most 3 parts per request; send the rest in further requests');
    expect(await count(t, 'instances')).toBe(0);
    expect(await count(t, 'import_rejects')).toBe(0);

    const three = await t.request('POST', '/v1/instances', { rawBody: multipart([ct, ct, Buffer.alloc(0)]), headers: { 'Content-Type': MULTIPART } });
    expect(three.status, three.text).toBe(200);
    expect(three.json.data.outcomes.map((o: { outcome: string }) => o.outcome)).toEqual(['imported', 'duplicate', 'rejected']);
    expect(await count(t, 'instances')).toBe(1);
  });
});
