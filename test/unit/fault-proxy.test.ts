/**
 * The fault proxy sync's tests put between a workstation and the hub (test/helpers/fault-proxy.ts):
 * each fault does what a network does, since the tests that use it are only as good as the faults.
 */
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.ts';

const BODY = Buffer.alloc(200_000, 'x');
let target: Server;
let targetPort = 0;
let proxy: FaultProxy | undefined;

beforeAll(async () => {
  target = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const echo = Buffer.concat(chunks);
      res.setHeader('Content-Type', 'application/octet-stream');
      res.end(req.url === '/big' ? BODY : echo);
    });
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', resolve));
  const address = target.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  targetPort = address.port;
});
afterAll(async () => {
  await new Promise<void>((resolve) => target.close(() => resolve()));
});
afterEach(async () => {
  await proxy?.close();
  proxy = undefined;
});

async function start(seed = 7): Promise<FaultProxy> {
  proxy = await startFaultProxy({ host: '127.0.0.1', port: targetPort }, seed);
  return proxy;
}

/** One raw HTTP/1.1 request; what came back before the connection ended, and how it ended. */
function rawRequest(port: number, path: string, body = ''): Promise<{ bytes: Buffer; error: string | null; ms: number }> {
  return new Promise((resolve) => {
    const started = performance.now();
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let error: string | null = null;
    socket.on('connect', () => {
      socket.write(`POST ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (e: NodeJS.ErrnoException) => (error = e.code ?? e.message));
    socket.on('close', () => resolve({ bytes: Buffer.concat(chunks), error, ms: performance.now() - started }));
  });
}

const bodyOf = (bytes: Buffer): Buffer => bytes.subarray(bytes.indexOf('\r\n\r\n') + 4);

describe('fault proxy', () => {
  it('passes both directions through unchanged when healthy', async () => {
    const p = await start();
    const sent = 'a'.repeat(50_000);
    const echoed = await rawRequest(p.port, '/echo', sent);
    expect(bodyOf(echoed.bytes).toString()).toBe(sent);
    const big = await rawRequest(p.port, '/big');
    expect(bodyOf(big.bytes).equals(BODY)).toBe(true);
    expect(p.stats.bytesToTarget).toBeGreaterThan(50_000);
  });

  it('delays every chunk, in order, by the delay and its jitter', async () => {
    const p = await start();
    p.set({ delayMs: 80, jitterMs: 40 });
    const answer = await rawRequest(p.port, '/big');
    // There and back: at least two delays.
    expect(answer.ms).toBeGreaterThanOrEqual(160);
    expect(bodyOf(answer.bytes).equals(BODY)).toBe(true);
  });

  it('cuts an answer after N bytes and closes, as a link dying mid-response', async () => {
    const p = await start();
    p.set({ dropAfterBytes: 1000 });
    const answer = await rawRequest(p.port, '/big');
    expect(answer.bytes.length).toBe(1000);
    expect(p.stats.cut).toBe(1);
  });

  it('resets new connections', async () => {
    const p = await start();
    p.set({ reset: true });
    const answer = await rawRequest(p.port, '/big');
    expect(answer.error).toBe('ECONNRESET');
    expect(answer.bytes.length).toBe(0);
  });

  it('holds traffic during a partition and delivers it whole when the partition heals', async () => {
    const p = await start();
    p.schedule([
      { atMs: 0, plan: { blackhole: true } },
      { atMs: 400, plan: {} },
    ]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const sent = 'b'.repeat(30_000);
    const answer = await rawRequest(p.port, '/echo', sent);
    expect(answer.ms).toBeGreaterThanOrEqual(350);
    expect(bodyOf(answer.bytes).toString()).toBe(sent);
  });

  it('leaves a request hanging for as long as the partition lasts', async () => {
    const p = await start();
    p.set({ blackhole: true });
    const pending = rawRequest(p.port, '/echo', 'c');
    const outcome = await Promise.race([pending.then(() => 'answered'), new Promise((resolve) => setTimeout(() => resolve('still waiting'), 300))]);
    expect(outcome).toBe('still waiting');
    p.set({});
    expect(bodyOf((await pending).bytes).toString()).toBe('c');
  });
});
