/**
 * DICOMweb between mia and a real Orthanc with its DICOMweb plugin (issue 14): Orthanc's client
 * searches mia, retrieves a study into Orthanc byte for byte, and stores into mia with STOW-RS;
 * mia's client searches Orthanc and pulls a study Orthanc holds into mia's archive.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '#server/cli/main.ts';
import { firstValue, pullFromRemote, searchRemote } from '#server/dicomweb/client.ts';
import { stowBody, variantOf } from '../helpers/dicomweb.ts';
import { CT_SMALL, PYDICOM_CORPUS } from '../helpers/image-fixture.ts';
import { orthancInstalled, startOrthanc, type Orthanc } from '../helpers/orthanc.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const sha = (b: Buffer | Uint8Array): string => createHash('sha256').update(b).digest('hex');
const MR_SMALL = `${PYDICOM_CORPUS}/MR_small.dcm`;
const JPEG2000 = `${PYDICOM_CORPUS}/JPEG2000.dcm`;

let mia: TestServer;
let orthanc: Orthanc;

type DicomJson = Record<string, { vr: string; Value?: unknown[] }>;
type OrthancTags = Record<string, { vr: string; Value?: unknown }>;

function orthancValue(item: OrthancTags, tag: string): string {
  const value = item[tag]?.Value;
  return String(Array.isArray(value) ? value[0] : (value ?? ''));
}

/** The file mia's archive holds under a SOP Instance UID. */
async function archived(sop: string): Promise<Buffer> {
  const row = await mia.server.services.db.get<{ file_path: string }>('SELECT file_path FROM instances WHERE sop_instance_uid = ?', [sop]);
  if (!row) throw new Error(`mia does not hold ${sop}`);
  return readFileSync(join(mia.dataDir, row.file_path));
}

describe.skipIf(!orthancInstalled())('DICOMweb with Orthanc', () => {
  // Two studies in mia: one of two series (CT and a CT copy made a new series), one JPEG 2000.
  const ctStudy = readFileSync(CT_SMALL);
  const secondSeries = variantOf(CT_SMALL, { '(0020,000D)': '1.3.6.1.4.1.5962.1.2.1.20040119072730.12322' });
  const j2k = readFileSync(JPEG2000);

  beforeAll(async () => {
    mia = await startTestServer();
    const body = stowBody([{ bytes: ctStudy }, { bytes: secondSeries }, { bytes: j2k }]);
    const stored = await mia.request('POST', '/dicom-web/studies', { rawBody: body.body, headers: { 'Content-Type': body.contentType } });
    expect(stored.status, stored.text).toBe(200);
    orthanc = await startOrthanc({ dicomWebServers: { mia: { url: `${mia.url}/dicom-web/`, headers: { Authorization: `Bearer ${mia.adminKey}` } } } });
  });

  afterAll(async () => {
    await orthanc?.stop();
    await mia?.close();
  });

  it("Orthanc's client searches mia's studies and series", async () => {
    const studies = await orthanc.restJson<OrthancTags[]>('/dicom-web/servers/mia/qido', {
      method: 'POST',
      body: JSON.stringify({ Uri: '/studies', Arguments: { PatientName: 'compressed*' } }),
    });
    // Orthanc's /qido answers in its own shape: each value as text, with the tag's name.
    expect(studies.map((s) => orthancValue(s, '00100020')).sort()).toEqual(['1CT1', '8NM1']);
    const ct = studies.find((s) => orthancValue(s, '00100020') === '1CT1');
    // Its /get hands mia's DICOM JSON over as it came.
    const raw = await orthanc.restJson<DicomJson[]>('/dicom-web/servers/mia/get', { method: 'POST', body: JSON.stringify({ Uri: '/studies', Arguments: { PatientID: '1CT1' } }) });
    expect(raw[0]?.['00201206']?.Value).toEqual([2]);
    expect(raw[0]?.['00080061']?.Value).toEqual(['CT']);
    expect(orthancValue(ct ?? {}, '00100010')).toBe('CompressedSamples^CT1');
    const studyUid = orthancValue(ct ?? {}, '0020000D');
    const series = await orthanc.restJson<DicomJson[]>('/dicom-web/servers/mia/get', {
      method: 'POST',
      body: JSON.stringify({ Uri: `/studies/${studyUid}/series` }),
    });
    expect(series).toHaveLength(2);
  });

  it("Orthanc's client retrieves a study from mia and holds the same bytes", async () => {
    const studyUid = '1.3.6.1.4.1.5962.1.2.1.20040119072730.12322';
    await orthanc.rest('/dicom-web/servers/mia/retrieve', { method: 'POST', body: JSON.stringify({ Resources: [{ Study: studyUid }] }) });
    const ids = await orthanc.instanceIds();
    expect(ids).toHaveLength(2);
    for (const id of ids) {
      const file = Buffer.from(await (await orthanc.rest(`/instances/${id}/file`)).arrayBuffer());
      const tags = await orthanc.restJson<{ SOPInstanceUID: string }>(`/instances/${id}/simplified-tags`);
      expect(sha(file)).toBe(sha(await archived(tags.SOPInstanceUID)));
    }
    // A JPEG 2000 study comes over as stored, compressed.
    const nm = await orthanc.restJson<OrthancTags[]>('/dicom-web/servers/mia/qido', { method: 'POST', body: JSON.stringify({ Uri: '/studies', Arguments: { PatientID: '8NM1' } }) });
    const nmStudy = orthancValue(nm[0] ?? {}, '0020000D');
    await orthanc.rest('/dicom-web/servers/mia/retrieve', { method: 'POST', body: JSON.stringify({ Resources: [{ Study: nmStudy }] }) });
    const lookup = await orthanc.restJson<Array<{ ID: string; Type: string }>>('/tools/lookup', { method: 'POST', body: nmStudy });
    const instances = await orthanc.restJson<Array<{ ID: string; MainDicomTags: { SOPInstanceUID: string } }>>(`/studies/${lookup[0]?.ID}/instances`);
    const file = Buffer.from(await (await orthanc.rest(`/instances/${instances[0]?.ID}/file`)).arrayBuffer());
    expect(sha(file)).toBe(sha(j2k));
  });

  it("Orthanc's client reads mia's metadata and stores into mia with STOW-RS", async () => {
    const studyUid = '1.3.6.1.4.1.5962.1.2.1.20040119072730.12322';
    const metadata = await orthanc.restJson<DicomJson[]>('/dicom-web/servers/mia/get', { method: 'POST', body: JSON.stringify({ Uri: `/studies/${studyUid}/metadata` }) });
    expect(metadata).toHaveLength(2);
    expect(metadata[0]?.['00280010']?.Value).toEqual([128]);

    const upload = Buffer.from(variantOf(MR_SMALL, { '(0010,0020)': 'FROM-ORTHANC' }));
    const posted = await orthanc.restJson<{ ID: string }>('/instances', { method: 'POST', body: upload });
    await orthanc.rest('/dicom-web/servers/mia/stow', { method: 'POST', body: JSON.stringify({ Resources: [posted.ID] }) });
    const found = await mia.request('GET', '/dicom-web/instances?PatientID=FROM-ORTHANC');
    expect(found.json).toHaveLength(1);
    const sop = String((found.json as DicomJson[])[0]?.['00080018']?.Value?.[0]);
    const orthancFile = Buffer.from(await (await orthanc.rest(`/instances/${posted.ID}/file`)).arrayBuffer());
    expect(sha(await archived(sop))).toBe(sha(orthancFile));
  });

  it("mia's client searches Orthanc and pulls a study into its archive, the same instances", async () => {
    // A study only Orthanc holds: two instances of a new study.
    const a = variantOf(MR_SMALL, { '(0010,0020)': 'ORTHANC-ONLY', '(0010,0010)': 'Only^Orthanc' });
    const studyOfA = await orthanc.restJson<{ ParentStudy: string }>('/instances', { method: 'POST', body: a });
    const study = await orthanc.restJson<{ MainDicomTags: { StudyInstanceUID: string } }>(`/studies/${studyOfA.ParentStudy}`);
    const studyUid = study.MainDicomTags.StudyInstanceUID;
    const b = variantOf(MR_SMALL, { '(0020,000D)': studyUid, '(0010,0020)': 'ORTHANC-ONLY', '(0010,0010)': 'Only^Orthanc' });
    await orthanc.rest('/instances', { method: 'POST', body: b });

    const remote = { url: orthanc.dicomWebUrl, headers: {} };
    const found = await searchRemote(remote, 'studies', { PatientID: 'ORTHANC-ONLY' });
    expect(found.map((s) => firstValue(s, '0020000D'))).toEqual([studyUid]);
    expect(firstValue(found[0] ?? {}, '00100010')).toBe('Only^Orthanc');

    const pulled = await pullFromRemote(mia.server.runtime, remote, { studyUid }, 'test');
    expect(pulled.series).toBe(2);
    expect(pulled.counts.imported).toBe(2);
    expect(pulled.problems).toEqual([]);

    const lookup = await orthanc.restJson<Array<{ ID: string }>>('/tools/lookup', { method: 'POST', body: studyUid });
    const instances = await orthanc.restJson<Array<{ ID: string; MainDicomTags: { SOPInstanceUID: string } }>>(`/studies/${lookup[0]?.ID}/instances`);
    expect(instances).toHaveLength(2);
    for (const instance of instances) {
      const file = Buffer.from(await (await orthanc.rest(`/instances/${instance.ID}/file`)).arrayBuffer());
      expect(sha(await archived(instance.MainDicomTags.SOPInstanceUID))).toBe(sha(file));
    }
    // Pulling again stores nothing twice.
    const again = await pullFromRemote(mia.server.runtime, remote, { studyUid }, 'test');
    expect(again.counts.imported).toBe(0);
    expect(again.counts.duplicates).toBe(2);
  });

  it('mia dicomweb find and pull work from the command line, with --header for the remote', async () => {
    const lines: string[] = [];
    const io = { out: (l: string) => lines.push(l), err: (l: string) => lines.push(l) };
    const data = mkdtempSync(join(tmpdir(), 'mia-cli-dicomweb-'));
    // mia's own DICOMweb server as the remote this time: its key goes in --header.
    const auth = `Authorization: Bearer ${mia.adminKey}`;
    expect(await main(['dicomweb', 'find', '--data', data, '--url', `${mia.url}/dicom-web`, '--header', auth, '--patient-id', '8NM1'], io)).toBe(0);
    expect(lines.join('\n')).toContain('8NM1');
    const studyUid = /(1\.3\.6\.1\.4\.1\.5962\.1\.2\.8\.[\d.]+)/.exec(lines.join('\n'))?.[1] ?? '';
    expect(studyUid).not.toBe('');
    lines.length = 0;
    expect(await main(['dicomweb', 'pull', '--data', data, '--url', `${mia.url}/dicom-web`, '--header', auth, '--study', studyUid], io)).toBe(0);
    expect(lines.join('\n')).toMatch(/pulled 1 series: 1 imported/);
    // Without the key, mia's server refuses and the command says so.
    lines.length = 0;
    expect(await main(['dicomweb', 'find', '--data', data, '--url', `${mia.url}/dicom-web`], io)).toBe(1);
    expect(lines.join('\n')).toContain('HTTP 401');
  });
});
