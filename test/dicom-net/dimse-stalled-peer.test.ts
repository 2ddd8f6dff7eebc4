/**
 * A PACS that accepts mia's association and then stops reading, its connection still up (its
 * store process hung): a C-STORE of an object larger than the socket buffers must end, aborted
 * and reported, instead of waiting for good (and holding every routing send behind it). A PACS
 * whose A-ASSOCIATE-AC cannot be read gets its connection closed, not held open.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeAssociateRq, encodeAssociateAc, PC_RESULT, PDU } from '#server/dimse/pdu.ts';
import { dicomEcho, dicomStore } from '#server/dimse/scu.ts';
import { CT_SMALL } from '../helpers/image-fixture.ts';

const TIMEOUT_MS = 1_000;
const work = mkdtempSync(join(tmpdir(), 'mia-stalled-peer-'));
// Far more than loopback's socket buffers hold: the send has to wait for the peer to read.
const big = join(work, 'big.dcm');
let pacs: Server;
let port: number;
const peers: Socket[] = [];

beforeAll(async () => {
  writeFileSync(big, Buffer.concat([readFileSync(CT_SMALL), Buffer.alloc(24 * 1024 * 1024)]));
  pacs = createServer((socket) => {
    peers.push(socket);
    let received = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 6 || received[0] !== PDU.associateRq) return;
      const length = received.readUInt32BE(2);
      if (received.length < 6 + length) return;
      const rq = decodeAssociateRq(received.subarray(6, 6 + length));
      socket.write(
        encodeAssociateAc({
          calledAeTitle: rq.calledAeTitle,
          callingAeTitle: rq.callingAeTitle,
          applicationContext: rq.applicationContext,
          contexts: rq.contexts.map((c) => ({ id: c.id, result: PC_RESULT.acceptance, transferSyntax: c.transferSyntaxes[0]! })),
          user: { maxPduLength: 16_384, implementationClassUid: '1.2.3.4', implementationVersionName: 'HUNG' },
        }),
      );
      // Hung from here on: nothing more is read, and the connection stays up.
      socket.removeAllListeners('data');
      socket.pause();
    });
  });
  await new Promise<void>((resolve) => pacs.listen(0, '127.0.0.1', resolve));
  port = (pacs.address() as { port: number }).port;
});
afterAll(() => {
  for (const socket of peers) socket.destroy();
  pacs.close();
  rmSync(work, { recursive: true, force: true });
});

describe('a PACS that stops reading mid-store', () => {
  it('aborts the association once nothing has been taken for the timeout, and says so', async () => {
    const started = performance.now();
    const outcome = await dicomStore({ host: '127.0.0.1', port, calledAeTitle: 'HUNG', callingAeTitle: 'MIA', timeoutMs: TIMEOUT_MS }, [big]).then(
      (results) => ({ results, error: undefined }),
      (err: unknown) => ({ results: undefined, error: err instanceof Error ? err.message : String(err) }),
    );
    // Not sent, and why: the peer took nothing.
    const said = outcome.error ?? JSON.stringify(outcome.results);
    expect(said).toMatch(/took none of what was sent/);
    expect(outcome.results?.every((r) => r.outcome !== 'stored') ?? true).toBe(true);
    expect(performance.now() - started).toBeLessThan(10 * TIMEOUT_MS);
  });
});

describe('a PACS whose A-ASSOCIATE-AC cannot be read', () => {
  it('fails the request naming it, and closes the connection', async () => {
    let closed = false;
    const broken = createServer((socket) => {
      peers.push(socket);
      socket.once('close', () => (closed = true));
      // An A-ASSOCIATE-AC of four bytes: far too short to be one.
      socket.once('data', () => socket.write(Buffer.from([PDU.associateAc, 0, 0, 0, 0, 4, 0, 1, 0, 0])));
    });
    await new Promise<void>((resolve) => broken.listen(0, '127.0.0.1', resolve));
    try {
      const brokenPort = (broken.address() as { port: number }).port;
      await expect(dicomEcho({ host: '127.0.0.1', port: brokenPort, calledAeTitle: 'BROKEN', callingAeTitle: 'MIA', timeoutMs: 60_000 })).rejects.toThrow(/A-ASSOCIATE-AC that cannot be read/);
      // Well before any timeout: the connection is given up at once.
      const deadline = performance.now() + 5_000;
      while (!closed && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 25));
      expect(closed).toBe(true);
    } finally {
      broken.close();
    }
  });
});
