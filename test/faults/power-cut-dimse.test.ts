/**
 * A power cut under the DICOM listener: C-STOREs answered success before the cut must all be
 * stored after it. They are answered once durable in the intake log, and may not be indexed yet
 * (the indexer gathers a batch for up to 100 ms): the next start indexes them from the log. The
 * data folder is ext4 on a loop device, shut down dropping every write not yet durable
 * (loop-disk.ts), as losing power would.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { COMMAND, STATUS } from '#server/dimse/command-set.ts';
import { PDU } from '#server/dimse/pdu.ts';
import { makePhantoms } from '../imports/helpers.ts';
import {
  archivedFiles,
  associateRqFrom,
  CT_IMAGE_STORAGE,
  dataSetOffset,
  firstPdu,
  listedInstances,
  rawPeer,
  rawStore,
  sha256,
  startMiaDicom,
  waitFor,
  type MiaDicom,
} from '../dicom-net/dimse-harness.ts';
import { loopExt4, type LoopDisk } from './loop-disk.ts';
import { dicomFiles } from './serve-process.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-power-cut-dimse-'));
const image = join(work, 'disk.img');
const dataDir = join(work, 'data');
const phantoms = join(work, 'phantoms');
const EXPLICIT_LE = '1.2.840.10008.1.2.1';

let disk: LoopDisk | undefined;
let server: MiaDicom | undefined;

beforeAll(() => {
  mkdirSync(dataDir);
  disk = loopExt4(image, dataDir);
  if (disk.unavailable) return;
  makePhantoms(phantoms, { series: 1, seed: 421, size: 64, slices: 12, modality: 'CT' });
});

afterAll(async () => {
  await server?.stop();
  disk?.unmount();
  rmSync(work, { recursive: true, force: true });
});

/**
 * loop-disk.ts's power cut, from a python3 already started and waiting for its cue: the cut then
 * lands within a millisecond or two of the last answer, not after a process start.
 */
function armedPowerCut(dir: string): () => Promise<string> {
  const python = spawn('python3', ['-c', `
import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
sys.stdin.readline()
fcntl.ioctl(fd, 0x8004587D, struct.pack('I', 2))
print('cut', flush=True)
`, dir], { stdio: ['pipe', 'pipe', 'inherit'] });
  const done = new Promise<string>((resolve) => {
    let out = '';
    python.stdout.on('data', (c: Buffer) => (out += c.toString()));
    python.once('exit', () => resolve(out.trim()));
  });
  return async () => {
    python.stdin.write('now\n');
    return await done;
  };
}

describe('a power cut under the DICOM listener', () => {
  it('stores every instance answered success before the cut', async ({ skip }) => {
    skip(disk?.unavailable !== null, `needs a loop-mounted ext4 as the data folder: ${disk?.unavailable ?? ''}`);
    server = await startMiaDicom(dataDir, 'MIA', ['RAWSCU@127.0.0.1']);
    const cut = armedPowerCut(dataDir);
    const peer = await rawPeer(server.dicomPort);
    peer.send(associateRqFrom('MIA', 'RAWSCU', [{ id: 1, abstractSyntax: CT_IMAGE_STORAGE, transferSyntaxes: [EXPLICIT_LE] }]));
    expect((await firstPdu(peer)).type).toBe(PDU.associateAc);

    const answered: string[] = [];
    for (const [i, file] of dicomFiles(phantoms).entries()) {
      const bytes = readFileSync(file);
      const dataSet = bytes.subarray(dataSetOffset(bytes));
      const rsp = await rawStore(peer, dataSet, `1.2.826.0.1.3680043.10.1014.3${i}`);
      expect(rsp.commandField).toBe(COMMAND.cStoreRsp);
      expect(rsp.status).toBe(STATUS.success);
      answered.push(sha256(dataSet));
    }
    expect(answered).toHaveLength(12);

    // The cut comes right after the last answer, inside the indexer's wait for a batch.
    expect(await cut()).toBe('cut');
    // The power is gone for the process too.
    server.child.kill('SIGKILL');
    peer.socket.destroy();
    await server.stop();
    server = undefined;
    expect(disk?.remount()).toBeNull();

    server = await startMiaDicom(dataDir, 'MIA', ['RAWSCU@127.0.0.1']);
    const restarted = server;
    await waitFor(async () => (await listedInstances(restarted)).length === answered.length, 'every answered instance after the cut', 30_000);
    expect(archivedFiles(dataDir).map((a) => a.dataSetDigest).sort()).toEqual([...answered].sort());
  });
});
