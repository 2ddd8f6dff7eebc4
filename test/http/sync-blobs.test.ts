/**
 * Instance files as sync receives them (issue 13): kept only when their bytes hash to their name,
 * never half; a bucket is all or nothing; a bad frame is named.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, statSync, utimesSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archivePathFor } from '#server/imports/archive.ts';
import { BUCKET_TYPE, encodeBucket } from '#server/sync/blobs.ts';
import { enrollDevice } from '#server/sync/devices.ts';
import { PARTIAL_DIR } from '#server/sync/resumable.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let key: string;

beforeAll(async () => {
  t = await startTestServer({ hubMode: true });
  key = (await enrollDevice(t.server.services, 'blobs', 'test')).key;
});
afterAll(async () => {
  await t.close();
});

const file = (size = 1000): { sha: string; bytes: Buffer } => {
  const bytes = randomBytes(size);
  return { sha: createHash('sha256').update(bytes).digest('hex'), bytes };
};
const stored = (sha: string): boolean => existsSync(join(t.dataDir, archivePathFor(sha)));
const send = async (method: string, path: string, body: Buffer, type = 'application/octet-stream') =>
  await t.request(method, path, { key, rawBody: body, headers: { 'Content-Type': type, 'Mia-Sync-Protocol': '1' } });

describe('sync blobs', () => {
  it('keeps a file only under the digest of its bytes', async () => {
    const good = file();
    const put = await send('PUT', `/v1/sync/blobs/${good.sha}`, good.bytes);
    expect(put.status).toBe(201);
    expect(stored(good.sha)).toBe(true);
    expect((await send('PUT', `/v1/sync/blobs/${good.sha}`, good.bytes)).status).toBe(200);

    const other = file();
    const wrong = await send('PUT', `/v1/sync/blobs/${other.sha}`, file().bytes);
    expect(wrong.status).toBe(422);
    expect(wrong.json.error.details).toMatch(new RegExp(`not ${other.sha}`));
    expect(stored(other.sha)).toBe(false);
  });

  it('takes a bucket whole, or nothing of it', async () => {
    const files = [file(33 * 1024), file(5), file(70_000)];
    const ok = await send('POST', '/v1/sync/blobs', encodeBucket(files.map((f) => ({ sha256: f.sha, bytes: f.bytes }))), BUCKET_TYPE);
    expect(ok.status).toBe(201);
    expect(ok.json.data).toMatchObject({ stored: 3, present: 0 });
    expect(files.every((f) => stored(f.sha))).toBe(true);

    const fresh = [file(), file()];
    const bad = encodeBucket([{ sha256: fresh[0]!.sha, bytes: fresh[0]!.bytes }, { sha256: fresh[1]!.sha, bytes: file().bytes }]);
    const refused = await send('POST', '/v1/sync/blobs', bad, BUCKET_TYPE);
    expect(refused.status).toBe(422);
    expect(refused.json.error.details).toMatch(/file 2 hashes to .* nothing of this bucket was kept/);
    expect(fresh.some((f) => stored(f.sha))).toBe(false);
  });

  it('names a bucket cut short or lying about a length', async () => {
    const f = file();
    const whole = encodeBucket([{ sha256: f.sha, bytes: f.bytes }]);
    const cut = await send('POST', '/v1/sync/blobs', whole.subarray(0, whole.length - 10), BUCKET_TYPE);
    expect(cut.status).toBe(400);
    expect(cut.json.error.details).toMatch(/declares 1000 bytes, 990 follow/);
    const huge = Buffer.from(whole);
    huge.writeUInt32BE(0xffffffff, 32);
    const lying = await send('POST', '/v1/sync/blobs', huge, BUCKET_TYPE);
    expect(lying.status).toBe(400);
    expect(lying.json.error.details).toMatch(/4294967295 bytes; 1 to/);
    expect(stored(f.sha)).toBe(false);
  });

  it('takes many buckets sent at once (held a few at a time), each whole', async () => {
    const buckets = Array.from({ length: 10 }, () => [file(40_000), file(40_000), file(10)]);
    const replies = await Promise.all(buckets.map((fs) => send('POST', '/v1/sync/blobs', encodeBucket(fs.map((f) => ({ sha256: f.sha, bytes: f.bytes }))), BUCKET_TYPE)));
    expect(replies.map((r) => r.status)).toEqual(Array(10).fill(201));
    expect(buckets.flat().every((f) => stored(f.sha))).toBe(true);
  });

  it('takes a large file in ranges, each kept durable, refuses a range that does not continue the copy, and says where to go on from', async () => {
    const big = file(3 * 1024 * 1024 + 17);
    const put = async (start: number, end: number, body = big.bytes.subarray(start, end + 1), total = big.bytes.length) =>
      await t.request('PUT', `/v1/sync/blobs/${big.sha}`, { key, rawBody: body, headers: { 'Content-Type': 'application/octet-stream', 'Mia-Sync-Protocol': '1', 'Content-Range': `bytes ${start}-${end}/${total}` } });
    const offset = async () => (await t.request('GET', `/v1/sync/blobs/${big.sha}/upload`, { key, headers: { 'Mia-Sync-Protocol': '1' } })).json.data;
    expect(await offset()).toMatchObject({ received: 0, complete: false });

    const first = await put(0, 1024 * 1024 - 1);
    expect(first.status).toBe(200);
    expect(first.json.data).toMatchObject({ received: 1024 * 1024, complete: false, stored: false });
    expect(stored(big.sha)).toBe(false);
    // Sent again from the start (a client that lost the answer): refused, naming where the copy ends.
    const again = await put(0, 1024 * 1024 - 1);
    expect(again.status).toBe(409);
    expect(again.json.error.details).toMatch(/holds 1048576 bytes of this file; send from byte 1048576/);
    expect(await offset()).toMatchObject({ received: 1024 * 1024, complete: false });
    // A range whose header does not fit is a 400.
    expect((await put(5, 2, Buffer.alloc(0))).status).toBe(400);

    const last = await put(1024 * 1024, big.bytes.length - 1);
    expect(last.status).toBe(201);
    expect(last.json.data).toMatchObject({ received: big.bytes.length, complete: true, stored: true });
    expect(stored(big.sha)).toBe(true);
    expect(await offset()).toMatchObject({ complete: true });

    // Ranges that add up to other bytes: nothing kept, the copy starts over.
    const other = file(2 * 1024 * 1024);
    const wrong = randomBytes(other.bytes.length);
    const range = async (start: number, end: number) =>
      await t.request('PUT', `/v1/sync/blobs/${other.sha}`, { key, rawBody: wrong.subarray(start, end + 1), headers: { 'Content-Type': 'application/octet-stream', 'Mia-Sync-Protocol': '1', 'Content-Range': `bytes ${start}-${end}/${wrong.length}` } });
    expect((await range(0, 1024 * 1024 - 1)).status).toBe(200);
    const bad = await range(1024 * 1024, wrong.length - 1);
    expect(bad.status).toBe(422);
    expect(bad.json.error.details).toMatch(/send the file again from byte 0/);
    expect(stored(other.sha)).toBe(false);
    expect((await t.request('GET', `/v1/sync/blobs/${other.sha}/upload`, { key, headers: { 'Mia-Sync-Protocol': '1' } })).json.data.received).toBe(0);
  });

  it('removes a week-old partial upload of any device, a revoked one\'s too, when the next upload starts', async () => {
    const revoked = await enrollDevice(t.server.services, 'gone', 'test');
    expect((await t.request('DELETE', `/v1/devices/${revoked.device.id}`)).status).toBe(200);
    const dir = join(t.dataDir, PARTIAL_DIR);
    mkdirSync(dir, { recursive: true });
    const stale = join(dir, `${revoked.device.id}.${'a'.repeat(64)}.part`);
    const recent = join(dir, `${revoked.device.id}.${'b'.repeat(64)}.part`);
    writeFileSync(stale, randomBytes(4096));
    writeFileSync(recent, randomBytes(4096));
    const eightDaysAgo = new Date(Date.now() - 8 * 24 * 60 * 60 * 1000);
    utimesSync(stale, eightDaysAgo, eightDaysAgo);

    const next = file(2048);
    const started = await t.request('PUT', `/v1/sync/blobs/${next.sha}`, { key, rawBody: next.bytes.subarray(0, 1024), headers: { 'Content-Type': 'application/octet-stream', 'Mia-Sync-Protocol': '1', 'Content-Range': `bytes 0-1023/2048` } });
    expect(started.status).toBe(200);
    expect(existsSync(stale)).toBe(false);
    // Under a week old: its device may still come back and finish it.
    expect(existsSync(recent)).toBe(true);
  });

  it('keeps a week-old partial that its device is resuming right now, and takes the range whole', async () => {
    const big = file(4096);
    const dir = join(t.dataDir, PARTIAL_DIR);
    const headers = (start: number, end: number) => ({ 'Content-Type': 'application/octet-stream', 'Mia-Sync-Protocol': '1', 'Content-Range': `bytes ${start}-${end}/${big.bytes.length}` });
    expect((await t.request('PUT', `/v1/sync/blobs/${big.sha}`, { key, rawBody: big.bytes.subarray(0, 1024), headers: headers(0, 1023) })).status).toBe(200);
    const [name] = readdirSync(dir).filter((n) => n.endsWith(`${big.sha}.part`));
    const partial = join(dir, name ?? '');
    const eightDaysAgo = new Date(Date.now() - 8 * 24 * 60 * 60 * 1000);
    utimesSync(partial, eightDaysAgo, eightDaysAgo);

    // The rest of the file, sent slowly: its first bytes, then (the partial aged again, as another
    // node's look at it could have been) a second device starts an upload, then the remainder.
    const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = httpRequest(`${t.url}/v1/sync/blobs/${big.sha}`, { method: 'PUT', headers: { ...headers(1024, 4095), Authorization: `Bearer ${key}`, 'Content-Length': '3072' } }, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      });
      req.on('error', reject);
      req.write(big.bytes.subarray(1024, 1100));
      void (async () => {
        await expect.poll(() => statSync(partial).size, { timeout: 5000 }).toBe(1100);
        utimesSync(partial, eightDaysAgo, eightDaysAgo);
        const other = (await enrollDevice(t.server.services, 'other', 'test')).key;
        const next = file(2048);
        const started = await t.request('PUT', `/v1/sync/blobs/${next.sha}`, { key: other, rawBody: next.bytes.subarray(0, 1024), headers: { 'Content-Type': 'application/octet-stream', 'Mia-Sync-Protocol': '1', 'Content-Range': 'bytes 0-1023/2048' } });
        expect(started.status).toBe(200);
        expect(existsSync(partial)).toBe(true);
        req.end(big.bytes.subarray(1100));
      })().catch(reject);
    });
    const done = await answer;
    expect(done.status, done.body).toBe(201);
    expect(stored(big.sha)).toBe(true);
  });
});
