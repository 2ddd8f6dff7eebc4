/**
 * The DIMSE tests' parts, all real: `mia serve --dicom-port` as a process, dcmtk's network tools,
 * DICOM files written by pydicom (dimse_fixtures.py), and reads of what landed in mia's archive.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { join } from 'node:path';
import { COMMAND, decodeCommand, encodeCommand, type Command } from '#server/dimse/command-set.ts';
import { decodePData, encodeAssociateRq, encodePData } from '#server/dimse/pdu.ts';
import { freePort } from '../helpers/orthanc.ts';

const BIN = join(import.meta.dirname, '../../bin/mia.js');
const FIXTURES = join(import.meta.dirname, 'dimse_fixtures.py');

export type Run = { status: number | null; stdout: string; stderr: string };

/** One process to its end (dcmtk tools, `mia` commands). */
export async function run(command: string, args: readonly string[], timeoutMs = 60_000): Promise<Run> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const status = await new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  clearTimeout(timer);
  return { status, stdout, stderr };
}

export const mia = async (args: readonly string[]): Promise<Run> => await run(process.execPath, [BIN, ...args]);

export type MiaDicom = {
  url: string;
  dicomPort: number;
  dataDir: string;
  adminKey: string;
  child: ChildProcess;
  output(): string;
  /** The `data` of the API's answer. */
  get<T = unknown>(path: string): Promise<T>;
  stop(): Promise<void>;
};

/** `mia serve` with its DICOM listener as AE `aeTitle`, allowing the given AE@host callers. */
export async function startMiaDicom(dataDir: string, aeTitle: string, allow: readonly string[]): Promise<MiaDicom> {
  const dicomPort = await freePort();
  // An admin key for the HTTP checks, made on the folder before the server opens it.
  const keys = await mia(['keys', 'create', '--role', 'admin', '--email', 'dimse@hospital.test', '--data', dataDir]);
  if (keys.status !== 0) throw new Error(`mia keys create failed: ${keys.stderr}`);
  const adminKey = keys.stdout.trim().split('\n').at(-1) ?? '';
  const child = spawn(
    process.execPath,
    [BIN, 'serve', '--data', dataDir, '--port', '0', '--dicom-port', String(dicomPort), '--dicom-host', '127.0.0.1', '--ae-title', aeTitle, '--dicom-allow', allow.join(',')],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c.toString()));
  child.stderr.on('data', (c: Buffer) => (output += c.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', () => {
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match?.[1] && output.includes('mia DICOM listening')) resolve(match[1]);
    });
    void exited.then(() => reject(new Error(`mia serve exited before listening:\n${output}`)));
  });
  return {
    url,
    dicomPort,
    dataDir,
    adminKey,
    child,
    output: () => output,
    async get<T>(path: string): Promise<T> {
      const response = await fetch(`${url}${path}`, { headers: { Authorization: `Bearer ${adminKey}` } });
      if (!response.ok) throw new Error(`GET ${path}: ${response.status} ${await response.text()}`);
      // The API's envelope: { status, data, meta }.
      return ((await response.json()) as { data: T }).data;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

export type Fixture = { file: string; transfer_syntax: string; sop_class: string; sop_instance: string; study_instance: string };

/** Real files of several classes and syntaxes, new UIDs under one study named by `tag`. */
export async function writeFixtures(dir: string, tag: string): Promise<Fixture[]> {
  const result = await run('/usr/bin/python3', [FIXTURES, dir, tag]);
  if (result.status !== 0) throw new Error(`dimse_fixtures.py failed: ${result.stderr}`);
  return JSON.parse(result.stdout) as Fixture[];
}

/** storescu's option that proposes a file's own transfer syntax, so it is sent as it is. */
export const STORESCU_SYNTAX_OPTION: Record<string, string> = {
  '1.2.840.10008.1.2': '-xi',
  '1.2.840.10008.1.2.1': '-xe',
  '1.2.840.10008.1.2.2': '-xb',
  '1.2.840.10008.1.2.1.99': '-xd',
  '1.2.840.10008.1.2.5': '-xr',
  '1.2.840.10008.1.2.4.50': '-xy',
  '1.2.840.10008.1.2.4.51': '-xx',
  '1.2.840.10008.1.2.4.80': '-xt',
  '1.2.840.10008.1.2.4.90': '-xv',
  '1.2.840.10008.1.2.4.91': '-xw',
};

/** Where a Part 10 file's data set starts: after the preamble, DICM and group 0002. */
export function dataSetOffset(bytes: Buffer): number {
  if (bytes.toString('latin1', 128, 132) !== 'DICM') throw new Error('not a Part 10 file');
  // (0002,0000) UL group length comes first: 132 + 12 bytes of its element, then that many.
  return 144 + bytes.readUInt32LE(140);
}

export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** The digest of a file's data set (what travels in C-STORE), without its meta header. */
export function dataSetDigest(path: string): string {
  const bytes = readFileSync(path);
  return sha256(bytes.subarray(dataSetOffset(bytes)));
}

/** Every archived file of a data folder: its name (the digest of its bytes) and its data set's digest. */
export function archivedFiles(dataDir: string): Array<{ name: string; path: string; fileDigest: string; dataSetDigest: string }> {
  const found: Array<{ name: string; path: string; fileDigest: string; dataSetDigest: string }> = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir)) {
      if (entry.startsWith('.')) continue;
      const path = join(dir, entry);
      if (statSync(path).isDirectory()) walk(path);
      else {
        const bytes = readFileSync(path);
        found.push({ name: entry, path, fileDigest: sha256(bytes), dataSetDigest: sha256(bytes.subarray(dataSetOffset(bytes))) });
      }
    }
  };
  walk(join(dataDir, 'archive'));
  return found;
}

/** The errors dicom3tools' dciodvfy finds in a file (it exits 1 when there are any). */
export function dciodvfyErrors(path: string): string[] {
  const result = spawnSync('dciodvfy', [path], { encoding: 'utf8' });
  if (result.error) throw new Error(`dciodvfy could not run (apt-get install dicom3tools): ${result.error.message}`);
  return `${result.stdout}${result.stderr}`.split('\n').filter((line) => line.startsWith('Error'));
}

/**
 * Files left where received C-STOREs are written before they are stored (should be none once
 * answered): the archive's staging folder, and the upload spool the SCP used before.
 */
export function spooledFiles(dataDir: string): string[] {
  const found: string[] = [];
  const walk = (dir: string): void => {
    let entries: string[];
    try {
      entries = readdirSync(dir);
    } catch {
      return;
    }
    for (const entry of entries) {
      const path = join(dir, entry);
      // Renamed into the archive meanwhile: no longer spooled.
      const isDir = statSync(path, { throwIfNoEntry: false })?.isDirectory();
      if (isDir === undefined) continue;
      if (isDir) walk(path);
      else found.push(path);
    }
  };
  walk(join(dataDir, 'tmp', 'uploads'));
  walk(join(dataDir, 'archive', '.staging'));
  return found;
}

/** The SOP Instance UIDs the HTTP API lists, over every scan. */
export async function listedInstances(m: MiaDicom): Promise<string[]> {
  const uids: string[] = [];
  const scans = await m.get<{ items: Array<{ scan_id: string }> }>('/v1/scans?limit=500');
  for (const scan of scans.items) {
    const instances = await m.get<{ items: Array<{ instance_uid: string }> }>(`/v1/scans/${scan.scan_id}/instances?limit=2000`);
    uids.push(...instances.items.map((i) => i.instance_uid));
  }
  return uids.sort();
}

export async function waitFor(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** A raw TCP peer of mia's SCP: what it received, and whether the server closed on it. */
export type RawPeer = { socket: Socket; received(): Buffer; closed: Promise<void>; send(bytes: Buffer): void };

export async function rawPeer(port: number): Promise<RawPeer> {
  const socket = connect({ host: '127.0.0.1', port });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, received: () => Buffer.concat(chunks), closed, send: (bytes) => socket.write(bytes) };
}

export function associateRqFrom(calledAe: string, callingAe: string, contexts: Array<{ id: number; abstractSyntax: string; transferSyntaxes: string[] }>): Buffer {
  return encodeAssociateRq({
    calledAeTitle: calledAe,
    callingAeTitle: callingAe,
    applicationContext: '1.2.840.10008.3.1.1.1',
    contexts,
    user: { maxPduLength: 16_384, implementationClassUid: '1.2.3.4', implementationVersionName: 'RAW' },
  });
}

/** The complete PDUs in what a peer received. */
export function pdusOf(bytes: Buffer): Array<{ type: number; body: Buffer }> {
  const pdus: Array<{ type: number; body: Buffer }> = [];
  let at = 0;
  while (bytes.length - at >= 6 && bytes.length - at >= 6 + bytes.readUInt32BE(at + 2)) {
    const length = bytes.readUInt32BE(at + 2);
    pdus.push({ type: bytes[at] ?? 0, body: bytes.subarray(at + 6, at + 6 + length) });
    at += 6 + length;
  }
  return pdus;
}

/** Waits until the first PDU of the answer has fully arrived and returns it. */
export async function firstPdu(peer: RawPeer): Promise<{ type: number; body: Buffer }> {
  await waitFor(() => peer.received().length >= 6 && peer.received().length >= 6 + peer.received().readUInt32BE(2), 'an answer PDU');
  const bytes = peer.received();
  return { type: bytes[0] ?? 0, body: bytes.subarray(6, 6 + bytes.readUInt32BE(2)) };
}

export const CT_IMAGE_STORAGE = '1.2.840.10008.5.1.4.1.1.2';

export function storeCommand(sopInstanceUid: string, sopClassUid = CT_IMAGE_STORAGE): Buffer {
  return encodeCommand({ commandField: COMMAND.cStoreRq, messageId: 7, affectedSopClassUid: sopClassUid, affectedSopInstanceUid: sopInstanceUid, priority: 0, dataSetType: 0 });
}

/** Sends a C-STORE of `dataSet` on presentation context 1 in 16 KB fragments; resolves with its answer. */
export async function rawStore(peer: RawPeer, dataSet: Buffer, sopInstanceUid: string, sopClassUid = CT_IMAGE_STORAGE): Promise<Command> {
  const before = pdusOf(peer.received()).length;
  peer.send(encodePData([{ contextId: 1, command: true, last: true, data: storeCommand(sopInstanceUid, sopClassUid) }]));
  for (let at = 0; at < dataSet.length; at += 16_000) {
    peer.send(encodePData([{ contextId: 1, command: false, last: at + 16_000 >= dataSet.length, data: dataSet.subarray(at, at + 16_000) }]));
  }
  await waitFor(() => pdusOf(peer.received()).length > before, 'the C-STORE response');
  const answer = pdusOf(peer.received())[before];
  return decodeCommand(decodePData(answer?.body ?? Buffer.alloc(0))[0]?.data ?? Buffer.alloc(0));
}
