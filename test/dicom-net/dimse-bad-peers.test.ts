/**
 * Peers that break the rules, against mia's SCP (issue 14, "Bad peers"): a raw socket client
 * that aborts or hangs up in the middle of a C-STORE, proposes what mia does not take, or sends
 * PDUs that lie about their length, that are of no known type, or that trickle in a byte at a
 * time. Each is refused or aborted, nothing half-received stays (no spool file, no index row,
 * no archive file), the log names the problem, and the next association is served.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMAND, decodeCommand, STATUS } from '#server/dimse/command-set.ts';
import { decodeAssociateAc, decodePData, encodeAbort, encodePData, PC_RESULT, PDU } from '#server/dimse/pdu.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { CT_SMALL, PYDICOM_CORPUS } from '../helpers/image-fixture.ts';
import { freePort } from '../helpers/orthanc.ts';
import { associateRqFrom, dataSetOffset, firstPdu, pdusOf, rawPeer as rawPeerOf, run, spooledFiles, storeCommand, waitFor, type RawPeer } from './dimse-harness.ts';

const AE = 'MIA';
const MR_SMALL = join(PYDICOM_CORPUS, 'MR_small.dcm');
const CALLER = 'RAWSCU';
const CT_IMAGE = '1.2.840.10008.5.1.4.1.1.2';
const EXPLICIT_LE = '1.2.840.10008.1.2.1';
const MAX_ASSOCIATIONS = 4;
let t: TestServer;
let port: number;

beforeAll(async () => {
  port = await freePort();
  t = await startTestServer({
    dicom: {
      port,
      host: '127.0.0.1',
      aeTitle: AE,
      allow: [{ aeTitle: CALLER, host: '127.0.0.1' }, { aeTitle: 'ECHOSCU', host: '127.0.0.1' }, { aeTitle: 'STORESCU', host: '127.0.0.1' }],
      associationTimeoutMs: 1500,
      idleTimeoutMs: 1500,
      maxPduLength: 16_384,
      maxAssociations: MAX_ASSOCIATIONS,
      // Every instance spooled to a file and answered once indexed: the half-received and refused
      // cases below are about that path (dimse-intake.test.ts has the in-memory one).
      memoryInstanceBytes: 0,
    },
  });
});

afterAll(async () => {
  await t?.close();
});

const rawPeer = (): Promise<RawPeer> => rawPeerOf(port);

function associateRq(contexts: Array<{ id: number; abstractSyntax: string; transferSyntaxes: string[] }>, calling = CALLER): Buffer {
  return associateRqFrom(AE, calling, contexts);
}

async function associated(): Promise<RawPeer> {
  const peer = await rawPeer();
  peer.send(associateRq([{ id: 1, abstractSyntax: CT_IMAGE, transferSyntaxes: [EXPLICIT_LE] }]));
  const answer = await firstPdu(peer);
  expect(answer.type).toBe(PDU.associateAc);
  return peer;
}

function logText(): string {
  return readFileSync(join(t.dataDir, 'logs', 'mia.log'), 'utf8');
}

async function logged(pattern: RegExp): Promise<void> {
  await t.server.services.log.flush();
  await waitFor(async () => {
    await t.server.services.log.flush();
    return pattern.test(logText());
  }, `a log line matching ${pattern}`);
}

/** Still serving: echoscu gets its answer. */
async function expectServing(): Promise<void> {
  const echo = await run('echoscu', ['-aet', 'ECHOSCU', '-aec', AE, '127.0.0.1', String(port)]);
  expect(echo.status, echo.stderr).toBe(0);
}

function archiveFiles(): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return;
    }
    for (const e of entries) {
      if (e.isDirectory()) walk(join(dir, e.name));
      else found.push(e.name);
    }
  };
  walk(join(t.dataDir, 'archive'));
  return found;
}

async function instanceCount(): Promise<number> {
  const row = await t.server.services.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM instances');
  return Number(row?.n ?? 0);
}

describe('bad peers against mia SCP', () => {
  it('refuses per presentation context what it does not take, and accepts the rest', async () => {
    const peer = await rawPeer();
    peer.send(
      associateRq([
        { id: 1, abstractSyntax: '1.2.840.10008.5.1.4.1.1.481.5', transferSyntaxes: [EXPLICIT_LE] }, // RT Plan: no pixels
        { id: 3, abstractSyntax: CT_IMAGE, transferSyntaxes: ['1.2.840.10008.1.2.4.100'] }, // MPEG-2: not decoded
        { id: 5, abstractSyntax: CT_IMAGE, transferSyntaxes: ['1.2.840.10008.1.2.4.100', '1.2.840.10008.1.2.5', EXPLICIT_LE] },
        { id: 7, abstractSyntax: '1.2.840.10008.1.1', transferSyntaxes: ['1.2.840.10008.1.2'] },
      ]),
    );
    const answer = await firstPdu(peer);
    expect(answer.type).toBe(PDU.associateAc);
    const ac = decodeAssociateAc(answer.body);
    expect(ac.contexts.map((c) => [c.id, c.result])).toEqual([
      [1, PC_RESULT.abstractSyntaxNotSupported],
      [3, PC_RESULT.transferSyntaxesNotSupported],
      [5, PC_RESULT.acceptance],
      [7, PC_RESULT.acceptance],
    ]);
    // The caller's first syntax that mia decodes, not mia's favourite.
    expect(ac.contexts.find((c) => c.id === 5)?.transferSyntax).toBe('1.2.840.10008.1.2.5');
    peer.socket.destroy();
  });

  it('storescu offering only an unsupported syntax gets its context refused and sends nothing', async () => {
    // A deflated-only proposal for an RT Plan: the class is refused, nothing reaches the import.
    const rtplan = '/usr/lib/python3/dist-packages/pydicom/data/test_files/rtplan.dcm';
    const sent = await run('storescu', ['-aet', 'STORESCU', '-aec', AE, '-R', '127.0.0.1', String(port), rtplan]);
    expect(sent.stderr + sent.stdout).toMatch(/No presentation context|no acceptable presentation context|rejected/i);
    expect(await instanceCount()).toBe(0);
  });

  for (const ending of ['A-ABORT', 'closing the socket'] as const) {
    it(`leaves nothing half stored when the sender stops mid-transfer by ${ending}`, async () => {
      const before = await instanceCount();
      const file = readFileSync(CT_SMALL);
      const dataSet = file.subarray(dataSetOffset(file));
      const peer = await associated();
      peer.send(encodePData([{ contextId: 1, command: true, last: true, data: storeCommand('1.2.826.0.1.3680043.10.1014.999') }]));
      peer.send(encodePData([{ contextId: 1, command: false, last: false, data: dataSet.subarray(0, 8000) }]));
      // The spool file exists while the data set arrives.
      await waitFor(() => spooledFiles(t.dataDir).length === 1, 'the spool file');
      if (ending === 'A-ABORT') peer.send(encodeAbort(0, 0));
      else peer.socket.end();
      await peer.closed;
      await waitFor(() => spooledFiles(t.dataDir).length === 0, 'the spool file to go');
      expect(await instanceCount()).toBe(before);
      expect(archiveFiles()).toEqual([]);
      await expectServing();
    });
  }

  it('answers a whole C-STORE from the raw client once the instance is stored', async () => {
    const before = await instanceCount();
    const file = readFileSync(CT_SMALL);
    const dataSet = file.subarray(dataSetOffset(file));
    const peer = await associated();
    peer.send(encodePData([{ contextId: 1, command: true, last: true, data: storeCommand('1.2.826.0.1.3680043.10.1014.1000') }]));
    for (let at = 0; at < dataSet.length; at += 16_000) {
      peer.send(encodePData([{ contextId: 1, command: false, last: at + 16_000 >= dataSet.length, data: dataSet.subarray(at, at + 16_000) }]));
    }
    await waitFor(() => pdusOf(peer.received()).length >= 2, 'the C-STORE response');
    const answer = pdusOf(peer.received())[1];
    expect(answer?.type).toBe(PDU.pData);
    const rsp = decodeCommand(decodePData(answer?.body ?? Buffer.alloc(0))[0]?.data ?? Buffer.alloc(0));
    expect(rsp.commandField).toBe(COMMAND.cStoreRsp);
    expect(rsp.status).toBe(STATUS.success);
    // Acknowledged means indexed and in the archive already.
    expect(await instanceCount()).toBe(before + 1);
    expect(archiveFiles()).toHaveLength(1);
    peer.socket.destroy();
  });

  it('answers C000 naming the reason for a data set the import refuses, and keeps nothing of it', async () => {
    const before = await instanceCount();
    const file = readFileSync(CT_SMALL);
    // Cut inside Pixel Data: a complete C-STORE of a truncated data set.
    const truncated = file.subarray(dataSetOffset(file), file.length - 5000);
    const peer = await associated();
    peer.send(encodePData([{ contextId: 1, command: true, last: true, data: storeCommand('1.2.826.0.1.3680043.10.1014.1001') }]));
    for (let at = 0; at < truncated.length; at += 16_000) {
      peer.send(encodePData([{ contextId: 1, command: false, last: at + 16_000 >= truncated.length, data: truncated.subarray(at, at + 16_000) }]));
    }
    await waitFor(() => pdusOf(peer.received()).length >= 2, 'the C-STORE response');
    const rsp = decodeCommand(decodePData(pdusOf(peer.received())[1]?.body ?? Buffer.alloc(0))[0]?.data ?? Buffer.alloc(0));
    expect(rsp.status).toBe(STATUS.cannotUnderstand);
    expect(rsp.errorComment).toMatch(/truncat|ends|short|pixel/i);
    expect(await instanceCount()).toBe(before);
    expect(spooledFiles(t.dataDir)).toEqual([]);
    peer.socket.destroy();
  });

  const malformed: Array<{ name: string; bytes: () => Buffer; problem: RegExp; afterAssociation?: boolean }> = [
    {
      name: 'an A-ASSOCIATE-RQ announcing 4 GiB',
      bytes: () => Buffer.from([0x01, 0, 0xff, 0xff, 0xff, 0xf0, 0, 1]),
      problem: /announces 4294967280 bytes, more than the \d+ allowed/,
    },
    {
      name: 'an unknown PDU type',
      bytes: () => Buffer.from([0x09, 0, 0, 0, 0, 4, 0, 0, 0, 0]),
      problem: /unknown PDU type 0x09/,
    },
    {
      name: 'an item whose length overruns its PDU',
      bytes: () => {
        const rq = associateRq([{ id: 1, abstractSyntax: CT_IMAGE, transferSyntaxes: [EXPLICIT_LE] }]);
        // The application context item (right after the 68 fixed bytes) claims 60000 bytes.
        rq.writeUInt16BE(60_000, 6 + 68 + 2);
        return rq;
      },
      problem: /item 0x10 of 60000 bytes overruns its PDU/,
    },
    {
      name: 'a P-DATA-TF longer than the maximum mia announced',
      bytes: () => Buffer.from([0x04, 0, 0, 0x10, 0, 0]),
      problem: /PDU type 0x04 announces 1048576 bytes, more than the 16390 allowed/,
      afterAssociation: true,
    },
    {
      name: 'a PDV whose length overruns its PDU',
      bytes: () => Buffer.from([0x04, 0, 0, 0, 0, 8, 0, 0, 0x7f, 0, 1, 3, 0, 0]),
      problem: /PDV of 32512 bytes overruns its PDU/,
      afterAssociation: true,
    },
  ];

  for (const m of malformed) {
    it(`aborts on ${m.name}, logs it and keeps serving`, async () => {
      const peer = m.afterAssociation ? await associated() : await rawPeer();
      const already = peer.received().length;
      peer.send(m.bytes());
      await peer.closed;
      // What came back after the request is an A-ABORT (type 07).
      expect(peer.received()[already]).toBe(PDU.abort);
      await logged(m.problem);
      await expectServing();
    });
  }

  it('closes on a peer that trickles its association request byte by byte past the deadline', async () => {
    const peer = await rawPeer();
    const rq = associateRq([{ id: 1, abstractSyntax: CT_IMAGE, transferSyntaxes: [EXPLICIT_LE] }]);
    let at = 0;
    const timer = setInterval(() => {
      if (at < rq.length && !peer.socket.destroyed) peer.send(rq.subarray(at, (at += 1)));
    }, 100);
    await peer.closed;
    clearInterval(timer);
    expect(at).toBeLessThan(rq.length);
    await logged(/A-ASSOCIATE-RQ did not happen within 2 s|A-ASSOCIATE-RQ did not happen within 1 s/);
    await expectServing();
  });

  it('refuses associations beyond its cap (transient, local limit) and takes them again once one ends', async () => {
    const held: RawPeer[] = [];
    for (let i = 0; i < MAX_ASSOCIATIONS; i += 1) held.push(await associated());
    const extra = await rawPeer();
    extra.send(associateRq([{ id: 1, abstractSyntax: CT_IMAGE, transferSyntaxes: [EXPLICIT_LE] }]));
    const answer = await firstPdu(extra);
    expect(answer.type).toBe(PDU.associateRj);
    expect([...answer.body]).toEqual([0, 2, 3, 2]);
    for (const peer of held) peer.socket.destroy();
    await Promise.all(held.map((p) => p.closed));
    await waitFor(async () => (await run('echoscu', ['-aet', 'ECHOSCU', '-aec', AE, '127.0.0.1', String(port)])).status === 0, 'a free slot');
  });

  it('serves a real caller while connections that send nothing pile up (they do not hold association slots)', async () => {
    // Far more than the association cap, and more than the connections it keeps waiting.
    const silent = await Promise.all(Array.from({ length: 40 }, () => rawPeer()));
    const echo = await run('echoscu', ['-aet', 'ECHOSCU', '-aec', AE, '127.0.0.1', String(port)]);
    expect(echo.status, echo.stderr).toBe(0);
    // The ones waiting longest were closed to make room (waited for, not looked at once).
    await Promise.race(silent.map((p) => p.closed));
    for (const peer of silent) peer.socket.destroy();
    await Promise.all(silent.map((p) => p.closed));
  });

  it('survives 120 mutated copies of a real storescu session (seeded), serving C-ECHO between them and keeping nothing half-received', async () => {
    // A real session recorded through a relay: association, a C-STORE, release.
    const recorded: Buffer[] = [];
    const relay = createServer((client: Socket) => {
      const upstream = connect({ host: '127.0.0.1', port });
      client.on('data', (c: Buffer) => {
        recorded.push(Buffer.from(c));
        upstream.write(c);
      });
      upstream.on('data', (c: Buffer) => client.write(c));
      client.on('end', () => upstream.end());
      upstream.on('end', () => client.end());
      client.on('error', () => undefined);
      upstream.on('error', () => undefined);
    });
    const relayPort = await new Promise<number>((resolve) => relay.listen(0, '127.0.0.1', () => resolve((relay.address() as { port: number }).port)));
    // An instance no test before stored (CT_SMALL's UID is stored with other content by now, which
    // is a conflict). The tests before may still hold association slots for a moment.
    await waitFor(async () => {
      recorded.length = 0;
      return (await run('storescu', ['-aet', 'STORESCU', '-aec', AE, '127.0.0.1', String(relayPort), MR_SMALL])).status === 0;
    }, 'storescu through the relay');
    relay.close();
    const session = Buffer.concat(recorded);
    expect(session.length).toBeGreaterThan(9_000);

    let seed = 20261128;
    const rand = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return Math.floor((seed / 2 ** 32) * n);
    };
    const mutate = (bytes: Buffer): Buffer => {
      const b = Buffer.from(bytes);
      const at = rand(b.length - 8);
      switch (rand(6)) {
        case 0: // a few bytes anywhere
          for (let i = 0; i < 1 + rand(8); i++) b[rand(b.length)] = rand(256);
          return b;
        case 1: // cut short
          return b.subarray(0, at);
        case 2: // a length field that lies (PDU, item or element lengths are 16 or 32 bits)
          b.writeUInt32BE([0, 1, 0xffffffff, 0x7fffffff, rand(2 ** 30)][rand(5)] as number, at);
          return b;
        case 3: // bytes inserted
          return Buffer.concat([b.subarray(0, at), Buffer.alloc(rand(3000), rand(256)), b.subarray(at)]);
        case 4: // bytes removed
          return Buffer.concat([b.subarray(0, at), b.subarray(at + rand(500))]);
        default:
          b.writeUInt16BE(rand(65536), at);
          return b;
      }
    };
    for (let i = 0; i < 120; i++) {
      const peer = await rawPeer();
      const bytes = mutate(session);
      // In pieces, as a network delivers them, so reassembly is exercised too.
      for (let off = 0; off < bytes.length && !peer.socket.destroyed; ) {
        const n = 1 + rand(8192);
        peer.send(bytes.subarray(off, off + n));
        off += n;
      }
      await Promise.race([peer.closed, new Promise((resolve) => setTimeout(resolve, 300))]);
      peer.socket.destroy();
      await peer.closed;
      if (i % 40 === 39) {
        const echo = await run('echoscu', ['-aet', 'ECHOSCU', '-aec', AE, '127.0.0.1', String(port)]);
        expect(echo.status, `C-ECHO after ${i + 1} mutated sessions: ${echo.stderr}`).toBe(0);
      }
    }
    // Whatever was stored was stored whole; whatever was cut off left nothing behind.
    await waitFor(() => spooledFiles(t.dataDir).length === 0, 'no spooled file left', 20_000);
    const again = await run('storescu', ['-aet', 'STORESCU', '-aec', AE, '127.0.0.1', String(port), MR_SMALL]);
    expect(again.status, again.stderr).toBe(0);
  }, 240_000);

  it('closes an association that goes silent', async () => {
    const peer = await associated();
    await peer.closed;
    await logged(/the next PDU did not happen within/);
  });
});
