/**
 * An answer the client stopped reading (server/http/send-stall.ts): its connection is cut once
 * nothing has left for the stall time, so the file behind it is closed and the server can shut
 * down; a client that reads slowly gets the whole answer. A stopping server ends its event
 * streams (server/http/event-streams.ts) rather than wait for their clients.
 */
import { readdirSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_LIMITS } from '#server/config.ts';
import { newImportJobId } from '#server/imports/import-job.ts';
import { insertImportJob } from '#server/store/import-jobs.ts';
import { openSocket } from '../helpers/raw-http.ts';
import { seedAnalysedScans } from '../../bench/seed-results.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

// Progress is seen when a write the kernel took completes, and Linux wakes a writer only once
// half of what it queued has gone: on loopback, with buffers of megabytes, a reader must take
// ~2 MB per stall period to be seen moving (at the default minute, ~35 KB/s).
const STALL_MS = 2_000;
// Far more than loopback's socket buffers hold on both sides, so a client that does not read stalls the send.
const FILE_BYTES = 48 * 1024 * 1024;

let t: TestServer;
let exportPath: string;
let download: string;
const sockets: Socket[] = [];

beforeAll(async () => {
  t = await startTestServer({ httpLimits: { ...DEFAULT_HTTP_LIMITS, sendStallMs: STALL_MS } });
  await seedAnalysedScans(t.server.services.db, 5);
  const made = await t.request('POST', '/v1/exports', { body: { format: 'csv' } });
  expect(made.status).toBe(201);
  const id = (made.json as { data: { id: string } }).data.id;
  exportPath = join(t.dataDir, 'exports', `${id}.csv`);
  // A large export's file, as a store of many scans would write.
  writeFileSync(exportPath, Buffer.alloc(FILE_BYTES, 'a'));
  download = `GET /v1/exports/${id}/download HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${t.adminKey}\r\n\r\n`;
});
afterEach(() => {
  for (const socket of sockets.splice(0)) socket.destroy();
});
afterAll(async () => {
  await t.close();
});

/** Descriptors this process holds open on `path`. */
function openOn(path: string): number {
  return readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`) === path;
    } catch {
      return false;
    }
  }).length;
}

async function until(what: string, done: () => boolean, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (!done()) {
    if (performance.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('answers nobody reads', () => {
  it('cuts a download its client stopped reading and closes the file; the server still answers', async () => {
    const socket = await openSocket(t.url);
    sockets.push(socket);
    let closed = false;
    socket.once('close', () => (closed = true));
    socket.on('error', () => undefined);
    // Headers sent, then never a byte read: the socket stays paused, the peer's window fills.
    socket.pause();
    socket.write(download);
    await until('the file opened for the download', () => openOn(exportPath) > 0, 5_000);
    await until('the file closed', () => openOn(exportPath) === 0, 2 * STALL_MS + 5_000);
    // The reader sees its connection end once it reads what it was sent.
    socket.resume();
    await until('the connection closed', () => closed, 5_000);
    expect((await t.request('GET', '/v1/auth/me')).status).toBe(200);
  });

  it('lets a client that reads slowly finish', async () => {
    const socket = await openSocket(t.url);
    sockets.push(socket);
    let received = 0;
    let ended = false;
    socket.on('data', (chunk: Buffer) => {
      received += chunk.length;
      if (received > FILE_BYTES) ended = true;
      // A bit at a time with rests between: each read lets bytes leave, so the send never stalls.
      socket.pause();
      setTimeout(() => socket.resume(), received < 8 * 1024 * 1024 ? 20 : 0);
    });
    socket.write(download);
    await until('the whole file received', () => ended, 60_000);
    expect(received).toBeGreaterThan(FILE_BYTES);
  });
});

describe('a stopping server', () => {
  it('ends its event streams instead of waiting for their clients', { timeout: 30_000 }, async () => {
    const s = await startTestServer();
    const { db, clock, node } = s.server.services;
    // An import another process is running: its stream follows it until it ends.
    const job = await insertImportJob(db, { publicId: newImportJobId(), kind: 'path', sources: ['/elsewhere'], createdBy: null, owner: { node: node.id, pid: 999_999 }, at: clock.now().toISOString() });
    const socket = await openSocket(s.url);
    sockets.push(socket);
    const received: Buffer[] = [];
    let closed = false;
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    socket.once('close', () => (closed = true));
    socket.write(`GET /v1/imports/${job.public_id}/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${s.adminKey}\r\n\r\n`);
    await until('the stream started', () => Buffer.concat(received).toString().includes('event: progress'), 5_000);
    const started = performance.now();
    await s.close();
    // Well inside the shutdown grace that would otherwise cut it.
    expect(performance.now() - started).toBeLessThan(5_000);
    await until('the stream closed', () => closed, 5_000);
  });
});
