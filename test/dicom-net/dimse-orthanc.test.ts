/**
 * mia and Debian's Orthanc talking DIMSE both ways (issue 14): Orthanc pushes a study into mia's
 * SCP; mia queries Orthanc at patient, study and series level (study root and patient root) and
 * C-MOVEs a study from it into its own archive; `mia dicom send` stores files into Orthanc,
 * which then holds the same data set (byte for byte, or element for element where Orthanc
 * re-encodes what it receives).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dicomEcho, dicomFind, dicomMove, type DimsePeer } from '#server/dimse/scu.ts';
import { freePort, orthancInstalled, startOrthanc, type Orthanc } from '../helpers/orthanc.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { dataSetDigest, dataSetOffset, mia, run, sha256, writeFixtures, type Fixture } from './dimse-harness.ts';

const MIA_AE = 'MIA';
let work: string;
let t: TestServer;
let orthanc: Orthanc;
let orthancPeer: DimsePeer;
const studies: Record<'pushed' | 'moved' | 'sent', Fixture[]> = { pushed: [], moved: [], sent: [] };

async function miaInstanceUids(): Promise<string[]> {
  const rows = await t.server.services.db.all<{ sop_instance_uid: string }>('SELECT sop_instance_uid FROM instances ORDER BY sop_instance_uid');
  return rows.map((r) => r.sop_instance_uid);
}

async function upload(files: readonly Fixture[]): Promise<void> {
  for (const f of files) await orthanc.rest('/instances', { method: 'POST', body: readFileSync(f.file) });
}

async function orthancStudyId(studyUid: string): Promise<string> {
  const found = await orthanc.restJson<Array<{ ID: string; Type: string }>>('/tools/lookup', { method: 'POST', body: studyUid });
  const id = found.find((r) => r.Type === 'Study')?.ID;
  if (!id) throw new Error(`Orthanc does not know study ${studyUid}`);
  return id;
}

async function heldFile(peer: Orthanc, sopInstanceUid: string): Promise<Buffer> {
  const found = (await peer.restJson<Array<{ ID: string; Type: string }>>('/tools/lookup', { method: 'POST', body: sopInstanceUid })).find((r) => r.Type === 'Instance');
  if (!found) throw new Error(`${peer.aeTitle} lacks ${sopInstanceUid}`);
  return Buffer.from(await (await peer.rest(`/instances/${found.ID}/file`)).arrayBuffer());
}

/**
 * Exit 0 when two files hold the same elements with the same values (pydicom); VRs are not
 * compared, as DCMTK corrects some (an encapsulated Pixel Data written as OW becomes OB).
 */
const SAME_ELEMENTS = `
import sys, pydicom
a, b = (pydicom.dcmread(p) for p in sys.argv[1:3])
def values(ds):
    return {e.tag: (values(e.value[0]) if e.VR == 'SQ' and len(e.value) else e.value) for e in ds if e.tag != 0xFFFCFFFC}
sys.exit(0 if values(a) == values(b) else 1)
`;

const studyUidOf = (files: readonly Fixture[]): string => files[0]?.study_instance ?? '';

describe.skipIf(!orthancInstalled())('mia and Orthanc over DIMSE', () => {
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'mia-dimse-orthanc-'));
    const port = await freePort();
    t = await startTestServer({ dicom: { port, host: '127.0.0.1', aeTitle: MIA_AE, allow: [{ aeTitle: 'ORTHANC', host: '127.0.0.1' }] } });
    orthanc = await startOrthanc({ modalities: { mia: { aeTitle: MIA_AE, host: '127.0.0.1', port } } });
    orthancPeer = { host: '127.0.0.1', port: orthanc.dicomPort, calledAeTitle: orthanc.aeTitle, callingAeTitle: MIA_AE };
    studies.pushed = await writeFixtures(join(work, 'pushed'), 'orthanc-pushed');
    studies.moved = await writeFixtures(join(work, 'moved'), 'orthanc-moved');
    studies.sent = await writeFixtures(join(work, 'sent'), 'orthanc-sent');
    await upload(studies.pushed);
    await upload(studies.moved);
  });

  afterAll(async () => {
    await orthanc?.stop();
    await t?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('answers C-ECHO from mia', async () => {
    await dicomEcho(orthancPeer);
  });

  it('receives a study Orthanc pushes (C-STORE into mia)', async () => {
    await orthanc.rest('/modalities/mia/store', { method: 'POST', body: await orthancStudyId(studyUidOf(studies.pushed)) });
    expect(await miaInstanceUids()).toEqual(studies.pushed.map((f) => f.sop_instance).sort());
  });

  it('finds patients, studies and series on Orthanc', async () => {
    const patients = await dicomFind(orthancPeer, { level: 'PATIENT', patientId: 'DIMSE-orthanc-moved' });
    expect(patients.records).toEqual([expect.objectContaining({ level: 'PATIENT', patientId: 'DIMSE-orthanc-moved' })]);

    const studyUid = studyUidOf(studies.moved);
    for (const model of ['study-root', 'patient-root'] as const) {
      const found = await dicomFind(orthancPeer, { level: 'STUDY', model, patientId: 'DIMSE-orthanc-moved' });
      expect(found.records).toHaveLength(1);
      expect(found.records[0]).toMatchObject({ level: 'STUDY', studyInstanceUid: studyUid, patientId: 'DIMSE-orthanc-moved', series: 20, instances: 20 });
    }
    const wildcard = await dicomFind(orthancPeer, { level: 'STUDY', patientId: 'DIMSE-orthanc-*' });
    expect(wildcard.records).toHaveLength(2);

    const series = await dicomFind(orthancPeer, { level: 'SERIES', studyInstanceUid: studyUid });
    expect(series.records).toHaveLength(20);
    expect(new Set(series.records.map((r) => (r.level === 'SERIES' ? r.modality : '')))).toEqual(new Set(['CR', 'DX', 'MG', 'US', 'OT', 'XA', 'RF', 'NM', 'PT', 'MR', 'CT']));

    const limited = await dicomFind(orthancPeer, { level: 'SERIES', studyInstanceUid: studyUid, limit: 5 });
    expect(limited.records).toHaveLength(5);
    expect(limited.truncated).toBe(true);

    // The CLI prints the same as a table.
    const cli = await mia(['dicom', 'find', '--host', '127.0.0.1', '--port', String(orthanc.dicomPort), '--aec', orthanc.aeTitle, '--aet', MIA_AE, '--level', 'STUDY', '--patient-id', 'DIMSE-orthanc-moved']);
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toContain(studyUid);
  });

  it('moves a study from Orthanc into its own archive (C-MOVE to mia)', async () => {
    const before = new Set(await miaInstanceUids());
    const report = await dicomMove(orthancPeer, { level: 'STUDY', studyInstanceUid: studyUidOf(studies.moved), destination: MIA_AE });
    expect(report).toMatchObject({ status: 0, completed: 20, failed: 0 });
    const now = await miaInstanceUids();
    expect(now.filter((uid) => !before.has(uid)).sort()).toEqual(studies.moved.map((f) => f.sop_instance).sort());

    // Again from the CLI: every instance is a duplicate now, which mia answers with success.
    const peerArgs = ['--host', '127.0.0.1', '--port', String(orthanc.dicomPort), '--aec', orthanc.aeTitle, '--aet', MIA_AE];
    const cli = await mia(['dicom', 'move', ...peerArgs, '--study', studyUidOf(studies.moved), '--dest', MIA_AE]);
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toContain('20 completed, 0 failed');
    expect(await miaInstanceUids()).toEqual(now);
    // A destination Orthanc does not know: it refuses the move (C000, not A801), the CLI exits 1.
    const unknown = await mia(['dicom', 'move', ...peerArgs, '--study', studyUidOf(studies.moved), '--dest', 'NOWHERE']);
    expect(unknown.status).toBe(1);
    expect(unknown.stdout).toContain('0 completed, 0 failed, 0 warning (status 0xc000)');
    const echo = await mia(['dicom', 'echo', ...peerArgs]);
    expect(echo.status, echo.stderr).toBe(0);
  });

  it('sends files into Orthanc with mia dicom send, which then holds the same data sets', async () => {
    const cli = await mia(['dicom', 'send', '--host', '127.0.0.1', '--port', String(orthanc.dicomPort), '--aec', orthanc.aeTitle, '--aet', MIA_AE, join(work, 'sent')]);
    expect(cli.status, cli.stderr).toBe(0);
    expect(cli.stdout).toContain(`${studies.sent.length} of ${studies.sent.length} files stored`);
    // Orthanc keeps most data sets it receives byte for byte; a few it writes back as DCMTK
    // encodes them (deflated ones inflated, some sequence and item lengths made explicit). Those
    // must still hold the same elements and values as the file, which pydicom compares.
    const rewritten: Fixture[] = [];
    for (const f of studies.sent) {
      const held = await heldFile(orthanc, f.sop_instance);
      if (sha256(held.subarray(dataSetOffset(held))) === dataSetDigest(f.file)) continue;
      rewritten.push(f);
      const copy = join(work, `held-${f.sop_instance}.dcm`);
      writeFileSync(copy, held);
      const same = await run('/usr/bin/python3', ['-c', SAME_ELEMENTS, f.file, copy]);
      expect(same.status, `${f.file}: ${same.stdout}${same.stderr}`).toBe(0);
    }
    expect(rewritten.length).toBeLessThanOrEqual(5);
  });
});
