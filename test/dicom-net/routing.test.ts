/**
 * Routing against a real PACS (Debian's Orthanc): "an analysis of a CT finished -> send its SR to
 * Orthanc by C-STORE" and "a report was signed -> send its SR to Orthanc's /dicom-web by STOW-RS",
 * sent by the server's own background worker. Both SRs arrive, and Orthanc gives back the data
 * set mia wrote, byte for byte (Orthanc writes its own File Meta group, so that part differs).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeAnalysisSr, writeReportSr } from '#server/dicom-sr/structured-reports.ts';
import { startOrthanc, type Orthanc } from '../helpers/orthanc.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { analyseViaApi, importPhantoms, type PhantomWorkstation } from '../helpers/workstation-seed.ts';

let t: TestServer;
let orthanc: Orthanc;
let phantoms: PhantomWorkstation;

beforeAll(async () => {
  // The background worker looks for due jobs every 200 ms; due times follow the test's clock,
  // which stands still, so a new job is due at once.
  t = await startTestServer({ routingPollMs: 200, dicom: { port: 0, host: '127.0.0.1', aeTitle: 'MIA_ROUTER' } });
  // Orthanc accepts C-STORE only from the AE titles it knows: mia's, from loopback.
  orthanc = await startOrthanc({ modalities: { mia: { aeTitle: 'MIA_ROUTER', host: '127.0.0.1', port: 104 } } });
  phantoms = await importPhantoms(t);
}, 180_000);

afterAll(async () => {
  await orthanc?.stop();
  await t?.close();
});

/** The data set after the File Meta group, whose length (0002,0000) says where it ends. */
function dataSetOf(file: Uint8Array): Buffer {
  const b = Buffer.from(file);
  expect(b.toString('latin1', 128, 132)).toBe('DICM');
  const groupLength = b.readUInt32LE(132 + 8);
  return b.subarray(132 + 12 + groupLength);
}

async function waitForJob(predicate: (job: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
  const until = Date.now() + 60_000;
  for (;;) {
    const items = (await t.request('GET', '/v1/dicom/sends?limit=500')).json.data.items as Array<Record<string, unknown>>;
    const job = items.find(predicate);
    if (job && job['status'] !== 'queued' && job['status'] !== 'running') return job;
    if (Date.now() > until) throw new Error(`no finished send job: ${JSON.stringify(items)}\n${(await orthanc.log()).slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function inOrthanc(sopInstanceUid: string): Promise<Uint8Array> {
  const found = await orthanc.restJson<Array<{ ID: string; Type: string }>>('/tools/lookup', { method: 'POST', body: sopInstanceUid });
  const instance = found.find((f) => f.Type === 'Instance');
  expect(instance, `Orthanc lacks ${sopInstanceUid}`).toBeDefined();
  return new Uint8Array(await (await orthanc.rest(`/instances/${instance!.ID}/file`)).arrayBuffer());
}

describe('routing to Orthanc', () => {
  it('sends the SR of a finished CT analysis by C-STORE and a signed report\'s SR by STOW-RS', async () => {
    const node = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dimse', name: 'orthanc', ae_title: orthanc.aeTitle, host: '127.0.0.1', port: orthanc.dicomPort } });
    expect(node.status).toBe(201);
    const web = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dicomweb', name: 'orthanc-web', url: orthanc.dicomWebUrl } });
    expect(web.status).toBe(201);
    const ctRule = await t.request('POST', '/v1/dicom/routes', { body: { name: 'CT results to PACS', event: 'analysis.finished', conditions: { modalities: ['CT'] }, peer: 'orthanc' } });
    expect(ctRule.json.data).toMatchObject({ method: 'c-store' });
    const reportRule = await t.request('POST', '/v1/dicom/routes', { body: { name: 'signed reports to PACS', event: 'report.finalized', peer: 'orthanc-web' } });
    expect(reportRule.json.data).toMatchObject({ method: 'stow-rs' });

    const analysis = await analyseViaApi(t, phantoms.second.scan_uid);
    expect(analysis.status).toBe('succeeded');
    // The MR scan matches no rule: nothing is sent for it.
    const mr = await analyseViaApi(t, phantoms.clean.scan_uid);
    const stored = await waitForJob((j) => j['subject'] === analysis.id);
    expect(stored, JSON.stringify(stored)).toMatchObject({ status: 'sent', attempts: 1, method: 'c-store', last_error: null });
    const analysisSr = await writeAnalysisSr(t.server.services, analysis.id);
    expect(stored['sop_instance_uid']).toBe(analysisSr.sopInstanceUid);
    expect(Buffer.compare(dataSetOf(await inOrthanc(analysisSr.sopInstanceUid)), dataSetOf(analysisSr.bytes))).toBe(0);

    const radiologist = (await t.keyFor('radiologist')).key;
    const draft = await t.request('POST', '/v1/reports', { key: radiologist, body: { scan_id: phantoms.second.scan_uid, impression: 'Mass in the left hemisphere.' } });
    expect(draft.status).toBe(201);
    expect((await t.request('PATCH', `/v1/reports/${draft.json.data.id}`, { key: radiologist, body: { status: 'final' } })).status).toBe(200);
    const stowed = await waitForJob((j) => j['subject'] === draft.json.data.id);
    expect(stowed, JSON.stringify(stowed)).toMatchObject({ status: 'sent', attempts: 1, method: 'stow-rs', object: 'report_sr' });
    const reportSr = await writeReportSr(t.server.services, draft.json.data.id as string);
    expect(Buffer.compare(dataSetOf(await inOrthanc(reportSr.sopInstanceUid)), dataSetOf(reportSr.bytes))).toBe(0);

    const jobs = (await t.request('GET', '/v1/dicom/sends?limit=500')).json.data.items as Array<{ subject: string }>;
    expect(jobs.filter((j) => j.subject === mr.id)).toEqual([]);
    expect(await orthanc.instanceIds()).toHaveLength(2);
  });

  it('a PACS that does not know mia\'s AE title rejects the association: the job is retried, not given up', async () => {
    const stranger = await startOrthanc({ aeTitle: 'STRANGER' });
    try {
      const peer = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dimse', name: 'stranger', ae_title: 'STRANGER', host: '127.0.0.1', port: stranger.dicomPort } });
      expect(peer.status).toBe(201);
      const analysisId = ((await t.request('GET', '/v1/dicom/sends?limit=500')).json.data.items as Array<{ object: string; subject: string }>).find((j) => j.object === 'analysis_sr')!.subject;
      const job = await t.request('POST', `/v1/analyses/${analysisId}/send`, { body: { peer: 'stranger' } });
      expect(job.status).toBe(202);
      const failed = await waitForJob((j) => j['id'] === job.json.data.id);
      expect(failed, JSON.stringify(failed)).toMatchObject({ status: 'failed', attempts: 1, method: 'c-store' });
      // Orthanc hangs up on a calling AE it does not know rather than answering A-ASSOCIATE-RJ;
      // how that reaches mia depends on timing: a close, an abort, or a reset while sending.
      expect(failed['last_error']).toMatch(/C-STORE to stranger: (rejected|aborted|connection closed|ECONNRESET|EPIPE)/);
      expect(failed['next_attempt_at']).not.toBeNull();
      expect(await stranger.instanceIds()).toEqual([]);
    } finally {
      await stranger.stop();
    }
  }, 60_000);
});
