/**
 * What a client may hold of the HTTP server (issue 10, defect 7f): sockets that never finish
 * their headers are answered 408 and closed once the headers timeout passes, and sockets beyond
 * the connection cap are closed on arrival, while the server keeps serving everyone else.
 */
import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_HTTP_LIMITS } from '#server/config.ts';
import { openSocket, readUntilClosed } from '../helpers/raw-http.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const held: Socket[] = [];
afterEach(() => {
  for (const socket of held.splice(0)) socket.destroy();
});

async function hold(url: string, start: (socket: Socket) => void): Promise<{ closed: Promise<string> }> {
  const socket = await openSocket(url);
  held.push(socket);
  const closed = readUntilClosed(socket);
  start(socket);
  return { closed };
}

describe('headers timeout', () => {
  const HEADERS_TIMEOUT_MS = 500;
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ httpLimits: { ...DEFAULT_HTTP_LIMITS, headersTimeoutMs: HEADERS_TIMEOUT_MS } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('idle, half-sent and trickling connections are closed with 408; the server still answers', async () => {
    const startedAt = performance.now();
    const idle = await hold(t.url, () => undefined);
    const halfSent = await hold(t.url, (socket) => socket.write(`GET /v1/auth/me HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${t.adminKey}\r\n`));
    const trickling = await hold(t.url, (socket) => {
      socket.write('GET /v1/auth/me HTTP/1.1\r\n');
      // One header line every 100 ms: always busy, never done.
      const timer = setInterval(() => {
        if (socket.writable) socket.write('X-Slow: 1\r\n');
      }, 100);
      socket.once('close', () => clearInterval(timer));
    });

    const [idleText, halfText, trickleText] = await Promise.all([idle.closed, halfSent.closed, trickling.closed]);
    // Node's own defaults (60 s, checked every 30 s) would hold them for half a minute or more.
    expect(performance.now() - startedAt).toBeLessThan(10_000);
    for (const text of [idleText, halfText, trickleText]) expect(text).toMatch(/^HTTP\/1\.1 408 /);
    expect((await t.request('GET', '/v1/auth/me')).status).toBe(200);
  });

  it('answers requests the HTTP parser refuses (oversized headers, garbage) in the error envelope', async () => {
    const big = await hold(t.url, (socket) => socket.write(`GET /v1/auth/me HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
    const garbage = await hold(t.url, (socket) => socket.write('\u0001\u0002 not http at all\r\n\r\n'));
    const [bigText, garbageText] = await Promise.all([big.closed, garbage.closed]);
    expect(bigText).toMatch(/^HTTP\/1\.1 431 /);
    expect(garbageText).toMatch(/^HTTP\/1\.1 400 /);
    for (const [text, code] of [[bigText, 431], [garbageText, 400]] as const) {
      const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { status: string; error: { code: number; message: string } };
      expect(body.status).toBe('error');
      expect(body.error.code).toBe(code);
    }
    expect(JSON.parse(bigText.slice(bigText.indexOf('\r\n\r\n') + 4)).error.details).toContain('16 KB');
  });
});

describe('connection cap', () => {
  const CAP = 4;
  let t: TestServer;
  beforeAll(async () => {
    // Long timeouts: here only the cap may close anything.
    t = await startTestServer({ httpLimits: { ...DEFAULT_HTTP_LIMITS, maxConnections: CAP, headersTimeoutMs: 60_000 } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('connections beyond the cap are closed unanswered; once the holders leave, requests succeed', async () => {
    const holders = [];
    for (let i = 0; i < CAP; i += 1) holders.push(await hold(t.url, (socket) => socket.write('GET /v1/auth/me HTTP/1.1\r\nHost: 127.0.0.1\r\n')));
    // The server accepts in arrival order, so this one finds the cap full.
    const extra = await hold(t.url, (socket) => socket.write(`GET /v1/auth/me HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${t.adminKey}\r\n\r\n`));
    expect(await extra.closed).toBe('');

    for (const socket of held.splice(0)) socket.destroy();
    await Promise.all(holders.map((h) => h.closed));
    // The server counts a socket out when it sees it close, a moment after the client does.
    await expect
      .poll(async () => (await t.request('GET', '/v1/auth/me').catch(() => ({ status: 0 }))).status, { timeout: 10_000, interval: 50 })
      .toBe(200);
  });
});

describe('a client that hangs up mid-upload', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => {
    await t.close();
  });

  it('is logged as an aborted request, not as a server or storage error, and stores nothing', async () => {
    const socket = await openSocket(t.url);
    held.push(socket);
    const url = new URL(t.url);
    // Half of a declared 100,000-byte DICOM body, then the connection is gone.
    socket.write(
      `POST /v1/instances HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${t.adminKey}\r\n` +
        'Content-Type: application/dicom\r\nContent-Length: 100000\r\n\r\n',
    );
    socket.write(Buffer.alloc(50_000));
    await new Promise((resolve) => setTimeout(resolve, 200));
    socket.destroy();
    const logged = async (): Promise<string> => {
      await t.server.services.log.flush();
      return readFileSync(join(t.dataDir, 'logs', 'mia.log'), 'utf8');
    };
    await expect.poll(logged, { timeout: 5000 }).toContain('"event":"request.aborted"');
    const lines = await logged();
    expect(lines).not.toContain('"event":"unhandled"');
    expect(lines).not.toContain('"event":"storage.failed"');
    expect((await t.request('GET', '/v1/scans')).json.data.items).toEqual([]);
  });
});
