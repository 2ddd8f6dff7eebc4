/**
 * dcmtk's echoscu and storescu against `mia serve --dicom-port` as a process (issue 14): images
 * of eleven storage classes and ten transfer syntaxes arrive through C-STORE, are imported like
 * files, are listed by the HTTP API, and are archived with the data set bytes exactly as sent
 * (as dcmtk's storescp, writing bit for bit, receives them from the same storescu).
 * A calling AE that is not allowed is rejected, and stores nothing.
 */
import { spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  archivedFiles,
  dataSetDigest,
  dciodvfyErrors,
  listedInstances,
  run,
  spooledFiles,
  startMiaDicom,
  STORESCU_SYNTAX_OPTION,
  waitFor,
  writeFixtures,
  type Fixture,
  type MiaDicom,
} from './dimse-harness.ts';
import { freePort } from '../helpers/orthanc.ts';

const AE = 'MIA_SCP';
let work: string;
let server: MiaDicom;
let fixtures: Fixture[];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'mia-dimse-scp-'));
  fixtures = await writeFixtures(join(work, 'files'), 'scp');
  server = await startMiaDicom(join(work, 'data'), AE, ['ECHOSCU@127.0.0.1', 'STORESCU@localhost']);
});

afterAll(async () => {
  await server?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('mia as a DICOM SCP, called by dcmtk', () => {
  it('answers C-ECHO from an allowed AE, and rejects a calling AE that is not allowed', async () => {
    const echo = await run('echoscu', ['-aet', 'ECHOSCU', '-aec', AE, '127.0.0.1', String(server.dicomPort)]);
    expect(echo.status, echo.stderr).toBe(0);

    const stranger = await run('echoscu', ['-aet', 'STRANGER', '-aec', AE, '127.0.0.1', String(server.dicomPort)]);
    expect(stranger.status).not.toBe(0);
    expect(stranger.stderr).toMatch(/Calling AE Title Not Recognized/i);

    const wrongCalled = await run('echoscu', ['-aet', 'ECHOSCU', '-aec', 'NOT_MIA', '127.0.0.1', String(server.dicomPort)]);
    expect(wrongCalled.status).not.toBe(0);
    expect(wrongCalled.stderr).toMatch(/Called AE Title Not Recognized/i);
  });

  it('refuses storescu from a calling AE that is not allowed and stores nothing', async () => {
    const first = fixtures[0];
    if (!first) throw new Error('no fixtures');
    const sent = await run('storescu', ['-aet', 'STRANGER', '-aec', AE, '127.0.0.1', String(server.dicomPort), first.file]);
    expect(sent.status).not.toBe(0);
    expect(await listedInstances(server)).toEqual([]);
    expect(archivedFiles(server.dataDir)).toEqual([]);
  });

  it('imports a folder sent by storescu in every syntax mia decodes, keeping the data set bytes as sent', async () => {
    // storescu proposes one syntax family per option: a folder per transfer syntax, each file
    // sent in its own syntax (-R: only the contexts the files need), never converted. The same
    // goes to dcmtk's storescp writing what it receives bit for bit (+B): storescu re-encodes
    // some data sets as it sends them (it drops trailing padding, corrects VRs), so that copy,
    // not the file, is what was sent.
    const referencePort = await freePort();
    const referenceDir = join(work, 'storescp');
    mkdirSync(referenceDir);
    const storescp = spawn('storescp', ['-aet', 'REFERENCE', '+xa', '+B', '-od', referenceDir, String(referencePort)], { stdio: 'ignore' });
    try {
      await waitFor(async () => (await run('echoscu', ['-aec', 'REFERENCE', '127.0.0.1', String(referencePort)])).status === 0, 'storescp');
      const groups = new Map<string, Fixture[]>();
      for (const f of fixtures) groups.set(f.transfer_syntax, [...(groups.get(f.transfer_syntax) ?? []), f]);
      for (const [syntax, files] of groups) {
        const option = STORESCU_SYNTAX_OPTION[syntax];
        if (!option) throw new Error(`no storescu option for ${syntax}`);
        const folder = join(work, 'by-syntax', syntax);
        mkdirSync(folder, { recursive: true });
        for (const f of files) copyFileSync(f.file, join(folder, basename(f.file)));
        for (const [called, port] of [[AE, server.dicomPort], ['REFERENCE', referencePort]] as const) {
          const sent = await run('storescu', ['-aet', 'STORESCU', '-aec', called, '-R', option, '+sd', '127.0.0.1', String(port), folder]);
          expect(sent.status, `${syntax}: ${sent.stderr}`).toBe(0);
          // storescu exits 0 even when a store is refused; the answer is in its log.
          expect(sent.stderr + sent.stdout, syntax).not.toMatch(/Store Failed|Converting transfer syntax/);
        }
      }
      expect(groups.size).toBe(10);
    } finally {
      storescp.kill();
    }
    const sentDataSets = readdirSync(referenceDir).map((name) => dataSetDigest(join(referenceDir, name)));
    expect(sentDataSets).toHaveLength(fixtures.length);

    expect(await listedInstances(server)).toEqual(fixtures.map((f) => f.sop_instance).sort());
    const archived = archivedFiles(server.dataDir);
    expect(archived).toHaveLength(fixtures.length);
    // Content-addressed: each file is named by the digest of its bytes.
    for (const a of archived) expect(a.name.replace(/\.dcm$/, '')).toBe(a.fileDigest);
    expect(archived.map((a) => a.dataSetDigest).sort()).toEqual(sentDataSets.sort());
    // The file meta information mia writes in front of each data set adds nothing dciodvfy finds
    // wrong: each archived file has the errors of storescp's copy of the same data set, no more.
    const reference = new Map(readdirSync(referenceDir).map((name) => [dataSetDigest(join(referenceDir, name)), join(referenceDir, name)]));
    for (const a of archived) expect(dciodvfyErrors(a.path), a.name).toEqual(dciodvfyErrors(reference.get(a.dataSetDigest) ?? ''));
    expect(spooledFiles(server.dataDir)).toEqual([]);

    // One import job per association, named by the calling AE and its host, listed like any other.
    const jobs = await server.get<{ items: Array<{ sources: string[]; status: string; counts: { imported: number } }> }>('/v1/imports?limit=100');
    const fromDicom = jobs.items.filter((j) => j.sources[0] === 'dicom:STORESCU@127.0.0.1');
    expect(fromDicom).toHaveLength(new Set(fixtures.map((f) => f.transfer_syntax)).size);
    expect(fromDicom.every((j) => j.status === 'completed')).toBe(true);
    expect(fromDicom.reduce((sum, j) => sum + j.counts.imported, 0)).toBe(fixtures.length);
  });

  it('answers a duplicate with success and stores it once', async () => {
    const first = fixtures.find((f) => f.transfer_syntax === '1.2.840.10008.1.2.1');
    if (!first) throw new Error('no Explicit VR Little Endian fixture');
    const before = archivedFiles(server.dataDir).length;
    const again = await run('storescu', ['-aet', 'STORESCU', '-aec', AE, '-R', '127.0.0.1', String(server.dicomPort), first.file]);
    expect(again.status).toBe(0);
    expect(again.stderr + again.stdout).not.toMatch(/Store Failed/);
    expect(archivedFiles(server.dataDir)).toHaveLength(before);
  });
});
