/**
 * C-STORE through the intake log (server/imports/intake-log.ts): an instance received in memory
 * is answered once it is durable in the log, indexed moments later, and its association's release
 * is answered only once it is indexed. What a process that is gone left answered in the log is
 * indexed at the next start; a torn tail is not. A refused or half-received instance leaves
 * nothing behind. Real servers, real sockets, real files; storescu and a raw DIMSE client.
 */
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createServer, type MiaServer } from '#server/create-server.ts';
import { COMMAND, STATUS } from '#server/dimse/command-set.ts';
import { encodeAbort, encodePData, encodeReleaseRq, PDU } from '#server/dimse/pdu.ts';
import { hostNamePart, INTAKE_DIR, parseSegmentName, readIntakeSegment } from '#server/imports/intake-log.ts';
import { CT_SMALL } from '../helpers/image-fixture.ts';
import { freePort } from '../helpers/orthanc.ts';
import {
  archivedFiles,
  associateRqFrom,
  CT_IMAGE_STORAGE,
  dataSetOffset,
  firstPdu,
  listedInstances,
  pdusOf,
  rawPeer,
  rawStore,
  sha256,
  spooledFiles,
  startMiaDicom,
  storeCommand,
  waitFor,
  type RawPeer,
} from './dimse-harness.ts';

const AE = 'MIA';
const CALLER = 'RAWSCU';
const EXPLICIT_LE = '1.2.840.10008.1.2.1';
const work = mkdtempSync(join(tmpdir(), 'mia-intake-'));
const servers: MiaServer[] = [];

/** A server whose indexer waits a minute for a batch, so "answered" and "indexed" can be told apart. */
async function startHolding(dataDir: string): Promise<{ server: MiaServer; port: number }> {
  const port = await freePort();
  const server = await createServer({
    dataDir,
    dicom: { port, host: '127.0.0.1', aeTitle: AE, allow: [{ aeTitle: CALLER, host: '127.0.0.1' }, { aeTitle: 'STORESCU', host: '127.0.0.1' }], indexLingerMs: 60_000 },
  });
  servers.push(server);
  return { server, port };
}

async function instanceCount(server: MiaServer): Promise<number> {
  const row = await server.services.db.get<{ n: number }>('SELECT COUNT(*) AS n FROM instances');
  return Number(row?.n ?? 0);
}

function segments(dataDir: string): string[] {
  try {
    return readdirSync(join(dataDir, INTAKE_DIR)).map((name) => join(dataDir, INTAKE_DIR, name));
  } catch {
    return [];
  }
}

/** Records a start would read back from the log, and whether any segment still holds these bytes. */
async function intakeHolds(dataDir: string, bytes: Buffer): Promise<{ records: number; bytes: boolean }> {
  let records = 0;
  let found = false;
  for (const path of segments(dataDir)) {
    if (path.endsWith('.log')) records += (await readIntakeSegment(path, () => Promise.resolve())).records;
    if (readFileSync(path).includes(bytes)) found = true;
  }
  return { records, bytes: found };
}
const intakeEmpty = async (dataDir: string, bytes: Buffer): Promise<boolean> => {
  const held = await intakeHolds(dataDir, bytes);
  return held.records === 0 && !held.bytes;
};

async function associated(port: number): Promise<RawPeer> {
  const peer = await rawPeer(port);
  peer.send(associateRqFrom(AE, CALLER, [{ id: 1, abstractSyntax: CT_IMAGE_STORAGE, transferSyntaxes: [EXPLICIT_LE] }]));
  expect((await firstPdu(peer)).type).toBe(PDU.associateAc);
  return peer;
}

async function store(peer: RawPeer, dataSet: Buffer, uid: string): Promise<{ status: number | undefined; errorComment: string | undefined }> {
  const rsp = await rawStore(peer, dataSet, uid);
  expect(rsp.commandField).toBe(COMMAND.cStoreRsp);
  return { status: rsp.status, errorComment: rsp.errorComment };
}

const file = readFileSync(CT_SMALL);
const dataSet = file.subarray(dataSetOffset(file));

beforeAll(() => mkdirSync(work, { recursive: true }));

afterAll(async () => {
  for (const s of servers) await s.close().catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
});

describe('C-STORE through the intake log', () => {
  it('answers once the instance is durable in the log, and the release once it is indexed', async () => {
    const dataDir = join(work, 'answered');
    const { server, port } = await startHolding(dataDir);
    const peer = await associated(port);
    expect((await store(peer, dataSet, '1.2.826.0.1.3680043.10.1014.2000')).status).toBe(STATUS.success);

    // Answered: the whole instance is in the log, and not indexed yet (the indexer is holding).
    const [segment] = segments(dataDir);
    const records: Buffer[] = [];
    await readIntakeSegment(segment ?? '', (r) => {
      records.push(r.bytes);
      return Promise.resolve();
    });
    expect(records).toHaveLength(1);
    expect(records[0]?.subarray(dataSetOffset(records[0])).equals(dataSet)).toBe(true);
    expect(await instanceCount(server)).toBe(0);

    // The release cuts the wait short and is answered once the instance is indexed.
    peer.send(encodeReleaseRq());
    await waitFor(() => pdusOf(peer.received()).some((p) => p.type === PDU.releaseRp), 'the release answer', 20_000);
    expect(await instanceCount(server)).toBe(1);
    const archived = archivedFiles(dataDir);
    expect(archived.map((a) => a.fileDigest)).toEqual([sha256(records[0] ?? Buffer.alloc(0))]);
    // Indexed: the log keeps nothing of it.
    await waitFor(() => intakeEmpty(dataDir, dataSet.subarray(-4096)), 'the intake log to empty');
    await peer.closed;
  });

  it('keeps nothing of an instance it refuses or that is cut off mid-transfer', async () => {
    const dataDir = join(work, 'refused');
    const { server, port } = await startHolding(dataDir);
    const peer = await associated(port);
    // Cut inside Pixel Data: a complete C-STORE of a truncated data set.
    const refused = await store(peer, dataSet.subarray(0, dataSet.length - 5000), '1.2.826.0.1.3680043.10.1014.2001');
    expect(refused.status).toBe(STATUS.cannotUnderstand);
    expect(refused.errorComment).toMatch(/truncat|ends|short|pixel/i);
    await waitFor(() => intakeEmpty(dataDir, dataSet.subarray(-9000, -5000)), 'the refused record to go');

    peer.send(encodePData([{ contextId: 1, command: true, last: true, data: storeCommand('1.2.826.0.1.3680043.10.1014.2002') }]));
    peer.send(encodePData([{ contextId: 1, command: false, last: false, data: dataSet.subarray(0, 8000) }]));
    peer.send(encodeAbort(0, 0));
    await peer.closed;
    await server.services.log.flush();
    expect(await intakeEmpty(dataDir, dataSet.subarray(0, 8000).subarray(-4096))).toBe(true);
    expect(spooledFiles(dataDir)).toEqual([]);
    expect(await instanceCount(server)).toBe(0);
    expect(archivedFiles(dataDir)).toEqual([]);
  });

  it('indexes at start what a process that is gone left answered in the log, up to a torn tail', async () => {
    const { port } = await startHolding(join(work, 'crashed'));
    const peer = await associated(port);
    expect((await store(peer, dataSet, '1.2.826.0.1.3680043.10.1014.2003')).status).toBe(STATUS.success);
    // The segment as it is on disk once answered, as a process killed now would leave it, with
    // the start of another append that a power cut tore (never answered).
    const [segment] = segments(join(work, 'crashed'));
    const host = parseSegmentName(segment?.split('/').at(-1) ?? '')?.host ?? '';
    const dataDir = join(work, 'restarted');
    mkdirSync(join(dataDir, INTAKE_DIR), { recursive: true });
    const left = join(dataDir, INTAKE_DIR, `${2 ** 22 + 77}.1.1.${hostNamePart(host)}.log`);
    copyFileSync(segment ?? '', left);
    // After the record, where the zero fill was: its first 3,000 bytes again, the rest never written.
    const bytes = readFileSync(left);
    const first = 64;
    const end = first + 56 + bytes.readUInt32LE(first + 16) + bytes.readUInt32LE(first + 20);
    bytes.copy(bytes, end, first, first + 3000);
    writeFileSync(left, bytes);
    peer.socket.destroy();

    const restarted = await createServer({ dataDir });
    servers.push(restarted);
    await waitFor(async () => (await instanceCount(restarted)) === 1, 'the instance to be recovered', 20_000);
    await waitFor(() => segments(dataDir).length === 0, 'the recovered segment to go');
    const archived = archivedFiles(dataDir);
    expect(archived).toHaveLength(1);
    expect(archived[0]?.dataSetDigest).toBe(sha256(dataSet));
    // The job finishes in its own commit, which may come after the segment is recycled.
    const recoveredJob = async () =>
      await restarted.services.db.get<{ status: string; imported: number; created_by: string }>("SELECT status, imported, created_by FROM import_jobs WHERE created_by = 'dicom:recovered'");
    await waitFor(async () => ((await recoveredJob())?.status ?? 'running') !== 'running', 'the recovery job to finish');
    expect(await recoveredJob()).toMatchObject({ status: 'completed', imported: 1 });
    await restarted.services.log.flush();
    const logText = readFileSync(join(dataDir, 'logs', 'mia.log'), 'utf8');
    expect(logText).toMatch(/dimse\.intake_torn_tail/);
    expect(logText).toMatch(/dimse\.intake_recovered/);
  });

  it('has what it answered after mia serve is killed -9 right after the answer', async () => {
    const dataDir = join(work, 'killed');
    const first = await startMiaDicom(dataDir, AE, [`${CALLER}@127.0.0.1`]);
    const peer = await associated(first.dicomPort);
    expect((await store(peer, dataSet, '1.2.826.0.1.3680043.10.1014.2004')).status).toBe(STATUS.success);
    first.child.kill('SIGKILL');
    await first.stop();
    peer.socket.destroy();

    const second = await startMiaDicom(dataDir, AE, [`${CALLER}@127.0.0.1`]);
    try {
      await waitFor(async () => (await listedInstances(second)).length === 1, 'the answered instance after the restart', 20_000);
      expect(archivedFiles(dataDir).map((a) => a.dataSetDigest)).toEqual([sha256(dataSet)]);
      await waitFor(() => intakeEmpty(dataDir, dataSet.subarray(-4096)), 'the log to empty');
    } finally {
      await second.stop();
    }
  });
});
