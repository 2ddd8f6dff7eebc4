/**
 * Routing (issue 14, item 5): rules sent over HTTP, jobs made by a real analysis of phantom
 * series and a signed report, and sent by the server's worker to a STOW-RS peer that is first a
 * closed port, then an HTTP server answering as PS3.18 says (the network edge: the real peers,
 * Orthanc by C-STORE and STOW-RS, are in test/dicom-net/routing.test.ts). Time is the manual clock.
 */
import { createServer, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeAnalysisSr } from '#server/dicom-sr/structured-reports.ts';
import { claimNextSend } from '#server/jobs/jobs.ts';
import { registerNode } from '#server/jobs/node.ts';
import { beatNode } from '#server/store/nodes.ts';
import { objectSource } from '#server/routing/objects.ts';
import { BACKOFF_MS, createSendWorker, JITTER } from '#server/routing/send-worker.ts';
import { readFileSync } from 'node:fs';
import { CT_SMALL, seedImportedInstance } from '../helpers/image-fixture.ts';
import { freePort } from '../helpers/orthanc.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { analyseViaApi, importPhantoms, type PhantomWorkstation } from '../helpers/workstation-seed.ts';

const MAX_ATTEMPTS = 3;

let t: TestServer;
let phantoms: PhantomWorkstation;
/** The CT phantom's analysis, which found its tumour: what the retry tests send. */
let secondAnalysis: string;
beforeAll(async () => {
  // No background sending: each test runs the worker when it wants (runDue), clock in hand.
  t = await startTestServer({ routingPollMs: 0, routingMaxAttempts: MAX_ATTEMPTS });
  phantoms = await importPhantoms(t);
}, 120_000);
afterAll(async () => {
  await t?.close();
});

type Stored = { contentType: string; body: Buffer };

/** A STOW-RS server: stores each POST's body and answers with a Store Instances Response, or refuses. */
async function stowPeer(port: number, answer: 'store' | 'refuse' | 'busy'): Promise<{ server: Server; received: Stored[]; close(): Promise<void> }> {
  const received: Stored[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      received.push({ contentType: req.headers['content-type'] ?? '', body });
      const uid = /\x08\x00\x18\x00UI/.exec(body.toString('latin1'));
      const sop = uid ? body.toString('latin1', uid.index + 8, uid.index + 8 + body.readUInt16LE(uid.index + 6)).replace(/\0+$/, '') : '';
      if (answer === 'busy') {
        res.writeHead(503).end();
        return;
      }
      const item = { '00081150': { vr: 'UI', Value: ['1.2.840.10008.5.1.4.1.1.88.33'] }, '00081155': { vr: 'UI', Value: [sop] } };
      const json =
        answer === 'store'
          ? { '00081199': { vr: 'SQ', Value: [item] } }
          : { '00081198': { vr: 'SQ', Value: [{ ...item, '00081197': { vr: 'US', Value: [0xc122] } }] } };
      res.writeHead(answer === 'store' ? 200 : 409, { 'Content-Type': 'application/dicom+json' }).end(JSON.stringify(json));
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { server, received, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

async function addPeer(name: string, port: number): Promise<string> {
  const peer = await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dicomweb', name, url: `http://127.0.0.1:${port}/dicom-web` } });
  expect(peer.status).toBe(201);
  return peer.json.data.id as string;
}

async function jobs(query = ''): Promise<Array<Record<string, unknown>>> {
  const list = await t.request('GET', `/v1/dicom/sends${query}`);
  expect(list.status).toBe(200);
  return list.json.data.items as Array<Record<string, unknown>>;
}

async function analysisIdOf(scanId: string): Promise<string> {
  return (await analyseViaApi(t, scanId)).id;
}

describe('routing rules', () => {
  it('are added, listed, changed, disabled and removed; bad ones are refused naming the field', async () => {
    const peerId = await addPeer('rules-peer', 11112);
    const created = await t.request('POST', '/v1/dicom/routes', {
      body: { name: 'CT to PACS', event: 'analysis.finished', conditions: { modalities: ['CT'], positive_only: true }, peer: 'rules-peer' },
    });
    expect(created.status).toBe(201);
    expect(created.json.data).toMatchObject({ name: 'CT to PACS', enabled: true, event: 'analysis.finished', object: 'analysis_sr', peer_id: peerId, peer_name: 'rules-peer', method: 'stow-rs' });
    const id = created.json.data.id as string;

    const changed = await t.request('PUT', `/v1/dicom/routes/${id}`, { body: { name: 'CT to PACS', enabled: false, event: 'report.finalized', peer: peerId } });
    expect(changed.status).toBe(200);
    expect(changed.json.data).toMatchObject({ enabled: false, event: 'report.finalized', object: 'report_sr', conditions: {} });
    expect((await t.request('GET', `/v1/dicom/routes/${id}`)).json.data.enabled).toBe(false);

    const cases: Array<[Record<string, unknown>, number, RegExp]> = [
      [{ name: 'a', event: 'scan.opened', peer: peerId }, 400, /event/],
      [{ name: 'b', event: 'analysis.finished', conditions: { modalities: ['ct'] }, peer: peerId }, 400, /modalities/],
      [{ name: 'c', event: 'analysis.finished', conditions: { colour: 'red' }, peer: peerId }, 400, /colour/],
      [{ name: 'd', event: 'analysis.finished', object: 'report_sr', peer: peerId }, 400, /object/],
      [{ name: 'e', event: 'analysis.finished', peer: 'no such peer' }, 404, /Peer/],
      [{ name: 'f', event: 'instance.received', conditions: { positive_only: true }, peer: peerId }, 400, /positive_only/],
      [{ name: 'g', event: 'instance.received', object: 'analysis_sr', peer: peerId }, 400, /object/],
      [{ name: 'CT to PACS', event: 'analysis.finished', peer: peerId }, 409, /name/],
    ];
    for (const [body, status, field] of cases) {
      const reply = await t.request('POST', '/v1/dicom/routes', { body });
      expect(reply.status, JSON.stringify(body)).toBe(status);
      expect(JSON.stringify(reply.json.error), JSON.stringify(body)).toMatch(field);
    }

    expect((await t.request('DELETE', `/v1/dicom/routes/${id}`)).status).toBe(200);
    expect((await t.request('GET', `/v1/dicom/routes/${id}`)).status).toBe(404);
    const radiologist = (await t.keyFor('radiologist')).key;
    expect((await t.request('GET', '/v1/dicom/routes', { key: radiologist })).status).toBe(403);
  });
});

describe('send jobs', () => {
  it('an analysis finishing makes a job for each matching enabled rule only, and a signed report its SR job', async () => {
    const port = await freePort();
    const peerId = await addPeer('events-peer', port);
    const rule = async (body: Record<string, unknown>): Promise<string> => {
      const reply = await t.request('POST', '/v1/dicom/routes', { body: { peer: peerId, ...body } });
      expect(reply.status).toBe(201);
      return reply.json.data.id as string;
    };
    const ct = await rule({ name: 'ct positive', event: 'analysis.finished', conditions: { modalities: ['CT'], positive_only: true } });
    const mrHaemorrhage = await rule({ name: 'mr haemorrhage', event: 'analysis.finished', conditions: { modalities: ['MR'], labels: ['hemorrhage_detected'] } });
    await rule({ name: 'disabled', event: 'analysis.finished', enabled: false });
    const anyPositive = await rule({ name: 'any positive', event: 'analysis.finished', conditions: { positive_only: true } });
    const signed = await rule({ name: 'signed reports', event: 'report.finalized' });

    const second = await analysisIdOf(phantoms.second.scan_uid); // CT, one tumour
    secondAnalysis = second;
    const clean = await analysisIdOf(phantoms.clean.scan_uid); // MR, nothing
    const made = await jobs('?limit=500');
    const madeFor = (analysis: string) => made.filter((j) => j.subject === analysis).map((j) => j.rule_id).sort();
    expect(madeFor(second)).toEqual([anyPositive, ct].sort());
    expect(madeFor(clean)).toEqual([]);
    expect(made.filter((j) => j.rule_id === mrHaemorrhage)).toEqual([]);
    expect(made.find((j) => j.subject === second)).toMatchObject({ status: 'queued', attempts: 0, method: 'stow-rs', object: 'analysis_sr', event: 'analysis.finished', peer_id: peerId });

    const radiologist = (await t.keyFor('radiologist')).key;
    const draft = await t.request('POST', '/v1/reports', { key: radiologist, body: { scan_id: phantoms.second.scan_uid } });
    expect(draft.status).toBe(201);
    expect((await jobs('?limit=500')).filter((j) => j.rule_id === signed)).toEqual([]);
    expect((await t.request('PATCH', `/v1/reports/${draft.json.data.id}`, { key: radiologist, body: { status: 'final' } })).status).toBe(200);
    const reportJobs = (await jobs('?limit=500')).filter((j) => j.rule_id === signed);
    expect(reportJobs).toEqual([expect.objectContaining({ subject: draft.json.data.id, object: 'report_sr', event: 'report.finalized', status: 'queued' })]);

    // Jobs of this test stay queued; the next tests make their own. Remove its rules.
    for (const r of [ct, mrHaemorrhage, anyPositive, signed]) await t.request('DELETE', `/v1/dicom/routes/${r}`);
    for (const rule of (await t.request('GET', '/v1/dicom/routes')).json.data.items as Array<{ id: string }>) await t.request('DELETE', `/v1/dicom/routes/${rule.id}`);
    await t.server.services.db.run("UPDATE send_jobs SET status = 'gave_up' WHERE status = 'queued'");
  });

  it('retries a peer that refuses connections with backoff, then sends the SR bytes mia writes once it answers', async () => {
    const port = await freePort();
    const peerId = await addPeer('late-peer', port);
    const analysisId = secondAnalysis;
    const manual = await t.request('POST', `/v1/analyses/${analysisId}/send`, { body: { peer: 'late-peer' } });
    expect(manual.status).toBe(202);
    const id = manual.json.data.id as string;
    const job = async () => (await t.request('GET', `/v1/dicom/sends/${id}`)).json.data;

    expect(await t.server.runtime.routing.runDue()).toBe(1);
    const first = await job();
    expect(first).toMatchObject({ status: 'failed', attempts: 1, finished_at: null });
    expect(first.last_error).toMatch(/ECONNREFUSED/);
    const wait = Date.parse(first.next_attempt_at as string) - t.clock.now().getTime();
    expect(wait).toBeGreaterThanOrEqual(BACKOFF_MS[0] * (1 - JITTER));
    expect(wait).toBeLessThanOrEqual(BACKOFF_MS[0] * (1 + JITTER));
    // Not due yet: nothing is tried.
    expect(await t.server.runtime.routing.runDue()).toBe(0);
    expect((await job()).attempts).toBe(1);

    const peer = await stowPeer(port, 'store');
    try {
      t.clock.advance(wait);
      expect(await t.server.runtime.routing.runDue()).toBe(1);
      const sent = await job();
      expect(sent).toMatchObject({ status: 'sent', attempts: 2, last_error: null, peer_id: peerId });
      expect(peer.received).toHaveLength(1);
      const { contentType, body } = peer.received[0]!;
      expect(contentType).toMatch(/^multipart\/related; type="application\/dicom"; boundary=/);
      // The part's body is exactly the SR mia writes for the analysis (deterministic: same bytes).
      const boundary = contentType.split('boundary=')[1]!;
      const start = body.indexOf('\r\n\r\n') + 4;
      const end = body.lastIndexOf(Buffer.from(`\r\n--${boundary}--`));
      const written = await writeAnalysisSr(t.server.services, analysisId);
      expect(Buffer.compare(body.subarray(start, end), Buffer.from(written.bytes))).toBe(0);
      expect(sent.sop_instance_uid).toBe(written.sopInstanceUid);
    } finally {
      await peer.close();
    }
  });

  it('gives up after the configured attempts, does not retry a refusal, and an admin retry sends again', async () => {
    const closed = await freePort();
    await addPeer('never-peer', closed);
    const refusingPort = await freePort();
    await addPeer('refusing-peer', refusingPort);
    const analysisId = secondAnalysis;
    const never = (await t.request('POST', `/v1/analyses/${analysisId}/send`, { body: { peer: 'never-peer' } })).json.data.id as string;
    const job = async (id: string) => (await t.request('GET', `/v1/dicom/sends/${id}`)).json.data;
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt += 1) {
      expect(await t.server.runtime.routing.runDue()).toBe(1);
      t.clock.advance(2 * 3_600_000);
    }
    const gaveUp = await job(never);
    expect(gaveUp).toMatchObject({ status: 'gave_up', attempts: MAX_ATTEMPTS, next_attempt_at: null });
    expect(gaveUp.last_error).toMatch(/ECONNREFUSED.*gave up after 3 attempts/);
    expect(await t.server.runtime.routing.runDue()).toBe(0);

    const refusing = await stowPeer(refusingPort, 'refuse');
    try {
      const refused = (await t.request('POST', `/v1/analyses/${analysisId}/send`, { body: { peer: 'refusing-peer' } })).json.data.id as string;
      expect(await t.server.runtime.routing.runDue()).toBe(1);
      const r = await job(refused);
      expect(r).toMatchObject({ status: 'gave_up', attempts: 1 });
      expect(r.last_error).toMatch(/refused \(HTTP 409, failure reason 0xC122\)/);
      t.clock.advance(24 * 3_600_000);
      expect(await t.server.runtime.routing.runDue()).toBe(0);
      expect(refusing.received).toHaveLength(1);
      expect((await jobs('?status=gave_up&limit=500')).map((j) => j.id)).toEqual(expect.arrayContaining([never, refused]));
    } finally {
      await refusing.close();
    }

    // The peer is back: the admin retries the job that gave up.
    const back = await stowPeer(closed, 'store');
    try {
      const retried = await t.request('POST', `/v1/dicom/sends/${never}/retry`);
      expect(retried.status).toBe(200);
      expect(retried.json.data).toMatchObject({ status: 'queued', attempts: 0 });
      expect((await t.request('POST', `/v1/dicom/sends/${never}/retry`)).status).toBe(409);
      expect(await t.server.runtime.routing.runDue()).toBe(1);
      expect(await job(never)).toMatchObject({ status: 'sent', attempts: 1 });
      expect(back.received).toHaveLength(1);
    } finally {
      await back.close();
    }

    // Every attempt is in the audit trail, with the job and peer and no patient.
    const audit = (await t.request('GET', '/v1/audit?action=routing.send&limit=500')).json.data.items as Array<{ target: string; outcome: string; patient_id: string | null }>;
    const of = (id: string) => audit.filter((e) => e.target.startsWith(`send:${id} `)).map((e) => e.outcome);
    expect(of(never)).toEqual(['retrying', 'retrying', 'gave_up', 'sent']);
    expect(audit.every((e) => e.patient_id === null)).toBe(true);
    expect(JSON.stringify(audit)).not.toContain(phantoms.second.patient_id);
  });

  it('two nodes sending from one database send each job once', async () => {
    // A hub's nodes share the database: each claims a job with its owner (FOR UPDATE SKIP LOCKED
    // on PostgreSQL), so a job is sent by one of them only.
    const port = await freePort();
    await addPeer('shared-peer', port);
    const peer = await stowPeer(port, 'store');
    // Earlier tests moved the fake clock a day on, and this node's heartbeat (a real-time timer
    // writing fake time) may be from before: the other node would then rightly take a job it is
    // sending over as abandoned, and send it again (seen in CI: 7 for 6). A live node has beaten now.
    expect(await beatNode(t.server.services.db, t.server.services.node.id, t.clock.now().toISOString())).toBe(true);
    const other = await registerNode(t.server.services.db, t.clock, { heartbeat: false });
    try {
      const made: string[] = [];
      for (let i = 0; i < 6; i += 1) made.push((await t.request('POST', `/v1/analyses/${secondAnalysis}/send`, { body: { peer: 'shared-peer' } })).json.data.id as string);
      const services = t.server.services;
      const options = { source: objectSource({ analysis: writeAnalysisSr, report: null }), cStore: null, aeTitle: 'MIA', maxAttempts: MAX_ATTEMPTS, pollMs: 1_000 };
      const first = createSendWorker(services, options);
      const second = createSendWorker({ ...services, node: other }, options);
      const [a, b] = await Promise.all([first.runDue(), second.runDue()]);
      expect(a + b).toBe(made.length);
      expect(peer.received).toHaveLength(made.length);
      for (const id of made) expect((await t.request('GET', `/v1/dicom/sends/${id}`)).json.data).toMatchObject({ status: 'sent', attempts: 1 });
      await Promise.all([first.stop(), second.stop()]);
    } finally {
      await other.stop();
      await peer.close();
    }
  });

  it('a job whose sending node died is sent again by another', async () => {
    const port = await freePort();
    await addPeer('takeover-peer', port);
    const id = (await t.request('POST', `/v1/analyses/${secondAnalysis}/send`, { body: { peer: 'takeover-peer' } })).json.data.id as string;
    // Another node claims it and dies before finishing: its row goes, the job stays running.
    const dead = await registerNode(t.server.services.db, t.clock, { heartbeat: false });
    expect((await claimNextSend(t.server.services.db, dead, t.clock.now().toISOString()))?.public_id).toBe(id);
    await dead.stop();
    expect((await t.request('GET', `/v1/dicom/sends/${id}`)).json.data).toMatchObject({ status: 'running', attempts: 1 });
    const peer = await stowPeer(port, 'store');
    try {
      expect(await t.server.runtime.routing.runDue()).toBe(1);
      expect((await t.request('GET', `/v1/dicom/sends/${id}`)).json.data).toMatchObject({ status: 'sent', attempts: 2 });
      expect(peer.received).toHaveLength(1);
    } finally {
      await peer.close();
    }
  });

  it('an image arriving is forwarded as received to the peers of matching instance.received rules', async () => {
    const port = await freePort();
    await addPeer('forward-peer', port);
    const rule = async (name: string, modalities: string[]) =>
      (await t.request('POST', '/v1/dicom/routes', { body: { name, event: 'instance.received', conditions: { modalities }, peer: 'forward-peer' } })).json.data as { id: string; object: string };
    const ct = await rule('forward CT', ['CT']);
    expect(ct.object).toBe('instance');
    const mr = await rule('forward MR', ['MR']);
    const imported = await seedImportedInstance(t, CT_SMALL);
    const made = (await jobs('?status=queued&limit=500')).filter((j) => j.subject === imported.instanceUid);
    expect(made.map((j) => j.rule_id)).toEqual([ct.id]);
    expect(made[0]).toMatchObject({ event: 'instance.received', object: 'instance' });

    const peer = await stowPeer(port, 'store');
    try {
      expect(await t.server.runtime.routing.runDue()).toBe(1);
      expect(await t.request('GET', `/v1/dicom/sends/${made[0]!.id as string}`)).toMatchObject({ json: { data: { status: 'sent', sop_instance_uid: imported.instanceUid } } });
      const { contentType, body } = peer.received[0]!;
      const boundary = contentType.split('boundary=')[1]!;
      const part = body.subarray(body.indexOf('\r\n\r\n') + 4, body.lastIndexOf(Buffer.from(`\r\n--${boundary}--`)));
      // The file as it was received, byte for byte.
      expect(Buffer.compare(part, readFileSync(CT_SMALL))).toBe(0);
    } finally {
      await peer.close();
      for (const r of [ct, mr]) await t.request('DELETE', `/v1/dicom/routes/${r.id}`);
    }
  });
});
