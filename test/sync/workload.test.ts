/**
 * A seeded random workload under faults (issue 13), checked by an oracle that records what each
 * workstation acknowledged. Three workstations (`mia serve`, a sync round every second), each
 * reaching the hub through its own fault proxy whose plan changes every few seconds (delay with
 * jitter, a partition, resets, a push's answer cut after the hub committed, an answer cut after
 * N bytes); readers record verdicts on the findings all three hold and upload new instances.
 * After the network heals and every workstation has synced:
 *
 * - no acknowledged write is lost: every verdict is an event on the hub and on every workstation,
 *   every uploaded instance is on the hub, each once, with its file and the bytes its digest
 *   names, and every analysis a workstation ran during the faults is on the hub;
 * - every replica holds the same verdict events and shows the same verdict, which is the one the
 *   hub's own events derive (the highest HLC among the heads);
 * - repeated pushes left no duplicate change in the hub's log;
 * - reports (drafted, rewritten and signed on any workstation, often the same one on two) are the
 *   same everywhere; every acknowledged impression is in the hub's log; a draft shows the one
 *   written last by HLC; a report signed anywhere is final everywhere, and every signed text is
 *   its body or one of its addenda;
 * - each workstation's audit trail, as far as it has sent it, is on the hub whole with no gap;
 * - sampled all along, no reader saw a value go back in time (watchWhatReadersSee).
 * One workstation's clock is 10 minutes ahead and one 10 minutes behind (faketime).
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { archivePathFor } from '#server/imports/archive.ts';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveVerdict } from '#server/scans/verdict-events.ts';
import type { ReviewEventRow } from '#server/store/review-events.ts';
import { phantomDicom } from '../analysis/analysis-helpers.ts';
import { startFaultProxy, type FaultPlan, type FaultProxy } from '../helpers/fault-proxy.ts';
import { freshPostgresDatabase } from '../helpers/postgres-cluster.ts';
import { digestDifference, digestOf, hubArgs, lastLine, mia, queryFolder, request, startHub, startWorkstation, type Hub, type HubPlace } from './harness.ts';
import { seededRandom } from '../helpers/random.ts';
import Database from 'better-sqlite3';
import { DATABASE_FILE } from '#server/store/sqlite.ts';

/**
 * What a reader at each workstation could see, sampled while the workload runs, read-only from
 * its database: a signed report never shows as a draft again, a draft's impression never goes
 * back to an older write, a finding's verdict never to an older event, and no verdict event
 * disappears. (A draft that gets signed may change words: the signing chose them.)
 */
function watchWhatReadersSee(dirs: readonly string[]): { stop(): string[] } {
  const violations: string[] = [];
  const dbs = dirs.map((d) => {
    const db = new Database(join(d, DATABASE_FILE), { readonly: true, fileMustExist: true });
    db.pragma('busy_timeout = 2000');
    return db;
  });
  const seen = dirs.map(() => ({ finals: new Set<string>(), drafts: new Map<string, string>(), verdicts: new Map<string, string>(), events: 0 }));
  const sample = (): void => {
    for (const [i, db] of dbs.entries()) {
      const was = seen[i]!;
      const where = `ws${i + 1}`;
      for (const r of db.prepare('SELECT public_id, status, impression_hlc FROM reports').all() as { public_id: string; status: string; impression_hlc: string | null }[]) {
        if (r.status === 'final') {
          was.finals.add(r.public_id);
          was.drafts.delete(r.public_id);
          continue;
        }
        if (was.finals.has(r.public_id)) violations.push(`${where}: report ${r.public_id} was final and shows as a draft`);
        const before = was.drafts.get(r.public_id);
        if (before !== undefined && (r.impression_hlc === null || r.impression_hlc < before)) violations.push(`${where}: draft ${r.public_id} went back from ${before} to ${r.impression_hlc ?? 'nothing'}`);
        if (r.impression_hlc !== null) was.drafts.set(r.public_id, r.impression_hlc);
      }
      for (const f of db.prepare('SELECT f.public_id AS id, MAX(e.hlc) AS hlc FROM review_events e JOIN findings f ON f.id = e.finding_ref GROUP BY f.public_id').all() as { id: string; hlc: string }[]) {
        const before = was.verdicts.get(f.id);
        if (before !== undefined && f.hlc < before) violations.push(`${where}: finding ${f.id} went back from ${before} to ${f.hlc}`);
        was.verdicts.set(f.id, f.hlc);
      }
      const events = (db.prepare('SELECT COUNT(*) AS n FROM review_events').get() as { n: number }).n;
      if (events < was.events) violations.push(`${where}: verdict events went from ${was.events} to ${events}`);
      was.events = events;
    }
  };
  const timer = setInterval(() => {
    try {
      sample();
    } catch (err) {
      violations.push(`sampling failed: ${String(err)}`);
    }
  }, 250);
  return {
    stop() {
      clearInterval(timer);
      sample();
      for (const db of dbs) db.close();
      return violations;
    },
  };
}

const ON_POSTGRES = process.env['MIA_TEST_BACKEND'] === 'postgres';
// .ci/run: a fixed seed for 30 s; npm run soak sets a longer run and its own seed.
const SEED = Number(process.env['MIA_SOAK_SEED'] ?? 13_013);
const WORKLOAD_MS = Number(process.env['MIA_SOAK_MS'] ?? 120_000);
/** Clocks as workstations have them: one right, one 10 minutes ahead, one 10 minutes behind. */
const CLOCKS = [undefined, '+10m', '-10m'] as const;


type Station = { data: string; proxy: FaultProxy; server: Hub; key: string; files: string[]; uploaded: string[]; verdicts: number; analyses: string[] };

let work: string;
let place: HubPlace;
let hub: Hub;
const stations: Station[] = [];
let shared: string[] = [];

const files = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile() && e.name.endsWith('.dcm')).map((e) => join(e.parentPath, e.name)).sort();

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'mia-sync-workload-'));
  place = { dataDir: join(work, 'hub'), databaseUrl: ON_POSTGRES ? await freshPostgresDatabase() : null };
  hub = await startHub(place);
  await phantomDicom(work, 'shared', { seed: 20_013_300, series: 4, modality: 'CT', slices: 10, size: 128, kinds: 'hemorrhage,tumor' });
  await phantomDicom(work, 'extra', { seed: 20_013_400, series: 3, modality: 'CT', slices: 6, size: 64 });
  const extra = readdirSync(join(work, 'extra')).sort();
  for (let i = 0; i < 3; i++) {
    const data = join(work, `ws${i + 1}`);
    const key = lastLine((await mia(['devices', 'enroll', `ws${i + 1}`, ...hubArgs(place)])).stdout);
    const proxy = await startFaultProxy({ host: '127.0.0.1', port: hub.port }, SEED + i);
    expect((await mia(['sync', 'join', proxy.url, '--data', data], { input: key })).status).toBe(0);
    expect((await mia(['import', join(work, 'shared'), '--data', data])).status).toBe(0);
    stations.push({ data, proxy, server: undefined as unknown as Hub, key: '', files: files(join(work, 'extra', extra[i]!)), uploaded: [], verdicts: 0, analyses: [] });
  }
  // The reader is the hub's user; the key the hub gave them works on every workstation once
  // it has synced (the hub's users and keys come down with each round).
  const readerKey = lastLine((await mia(['keys', 'create', '--role', 'radiologist', '--email', 'reader@hub.test', '--scopes', 'write:scans', ...hubArgs(place)])).stdout);
  // One workstation analyses; all three then hold the same findings.
  expect((await mia(['analyze', '--all', '--data', stations[0]!.data], { timeoutMs: 300_000 })).status).toBe(0);
  for (const s of [stations[0]!, stations[1]!, stations[2]!]) expect((await mia(['sync', 'now', '--data', s.data])).status).toBe(0);
  for (const s of stations) {
    s.key = readerKey;
    s.server = await startWorkstation(s.data, 1, CLOCKS[stations.indexOf(s)]);
  }
  shared = (await queryFolder<{ study_uid: string }>(stations[0]!.data, 'SELECT study_uid FROM studies ORDER BY study_uid')).map((r) => r.study_uid);
}, 400_000);

afterAll(async () => {
  for (const s of stations) {
    await s.server?.stop();
    await s.proxy.close();
  }
  await hub?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

const PLANS: readonly FaultPlan[] = [
  {},
  { delayMs: 20, jitterMs: 80 },
  { blackhole: true },
  { reset: true },
  { cutAnswerTo: 'POST /v1/sync/push' },
  { dropAfterBytes: 1500 },
];

describe('a random workload under faults, with an oracle', () => {
  it('loses no acknowledged write, and every replica converges on the same verdicts', async () => {
    const random = seededRandom(SEED);
    // The oracle of reports: every draft, impression and signing a workstation acknowledged.
    const reports = new Map<string, { edits: string[]; signed: string[] }>();
    let writes = 0;
    const scans = (await queryFolder<{ scan_id: string }>(stations[0]!.data, 'SELECT scan_id FROM scans WHERE latest_analysis_ref IS NOT NULL ORDER BY scan_id')).map((r) => r.scan_id);
    const findings = (await queryFolder<{ public_id: string }>(stations[0]!.data, "SELECT public_id FROM findings WHERE source = 'model' ORDER BY public_id")).map((r) => r.public_id);
    expect(findings.length).toBeGreaterThan(0);
    const readers = watchWhatReadersSee(stations.map((s) => s.data));
    const started = performance.now();
    let nextPlanAt = 0;
    while (performance.now() - started < WORKLOAD_MS) {
      if (performance.now() - started >= nextPlanAt) {
        for (const s of stations) s.proxy.set(PLANS[Math.floor(random() * PLANS.length)]!);
        nextPlanAt += 2000 + random() * 2000;
      }
      const s = stations[Math.floor(random() * stations.length)]!;
      const roll = random();
      if (roll < 0.15) {
        // Report work: draft one, rewrite an impression, or sign. Refusals are not acknowledged
        // writes: 404 (this workstation has not pulled that report yet), 409 (it is final here).
        const known = [...reports.keys()];
        const pick = roll < 0.03 || known.length === 0 ? null : known[Math.floor(random() * known.length)]!;
        if (pick === null) {
          const reply = await request(s.server.url, s.key, 'POST', '/v1/reports', { body: { scan_id: scans[Math.floor(random() * scans.length)]!, impression: `draft ${reports.size}` } });
          if (reply.status === 201 || reply.status === 200) reports.set(reply.json.data.id, { edits: [`draft ${reports.size}`], signed: [] });
          else expect(reply.status, reply.text).toBe(409);
        } else if (roll < 0.135) {
          const text = `impression ${++writes} on ws${stations.indexOf(s) + 1}`;
          const reply = await request(s.server.url, s.key, 'PATCH', `/v1/reports/${pick}`, { body: { impression: text } });
          if (reply.status === 200) reports.get(pick)!.edits.push(text);
          else expect([404, 409], reply.text).toContain(reply.status);
        } else {
          const reply = await request(s.server.url, s.key, 'PATCH', `/v1/reports/${pick}`, { body: { status: 'final' } });
          if (reply.status === 200) reports.get(pick)!.signed.push(reply.json.data.impression as string);
          else expect([404, 409], reply.text).toContain(reply.status);
        }
      } else if (roll < 0.85) {
        const finding = findings[Math.floor(random() * findings.length)]!;
        const reply = await request(s.server.url, s.key, 'PATCH', `/v1/findings/${finding}`, { body: { review: random() < 0.5 ? 'accepted' : 'rejected' } });
        // A report signed here locks its findings' verdicts: that refusal is not a write.
        if (reply.status === 409) expect(reply.json.error.message).toMatch(/final report/);
        else {
          expect(reply.status, reply.text).toBe(200);
          s.verdicts += 1;
        }
      } else if (s.files.length === 0) {
        // Its series is all here: analyse it (once), on this workstation, while the faults go on.
        if (s.analyses.length === 0) {
          const received = (await request(s.server.url, s.key, 'GET', '/v1/scans?status=received&limit=10')).json.data.items as { scan_id: string }[];
          for (const scan of received) {
            const reply = await request(s.server.url, s.key, 'POST', `/v1/scans/${scan.scan_id}/analyses`);
            expect(reply.status, reply.text).toBe(202);
            s.analyses.push(reply.json.data.id as string);
          }
        }
      } else {
        const file = s.files.shift()!;
        const reply = await fetch(`${s.server.url}/v1/instances`, { method: 'POST', headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/dicom' }, body: readFileSync(file) });
        expect(reply.status, await reply.text()).toBeLessThan(300);
        s.uploaded.push(file);
      }
      await new Promise((resolve) => setTimeout(resolve, random() * 150));
    }

    // The analyses asked for finish where they run (their results then wait in the outbox).
    for (const s of stations) {
      for (const id of s.analyses) {
        for (let waited = 0; ; waited += 250) {
          const job = (await request(s.server.url, s.key, 'GET', `/v1/analyses/${id}`)).json.data as { status: string };
          if (job.status === 'succeeded') break;
          expect(['queued', 'running'], `analysis ${id}: ${job.status}`).toContain(job.status);
          expect(waited, `analysis ${id} did not finish`).toBeLessThan(120_000);
          await new Promise((resolve) => setTimeout(resolve, 250));
        }
      }
    }

    // Heal; sync until nothing is pending anywhere, then once more so each pulls the others' last.
    for (const s of stations) s.proxy.set({});
    for (let pass = 0; pass < 2; pass++) {
      for (const s of stations) {
        for (let attempt = 0; ; attempt++) {
          const status = (await request(s.server.url, s.key, 'POST', '/v1/sync/run')).json.data as { pending: number; last_error: string | null };
          if (status.pending === 0 && !status.last_error) break;
          expect(attempt, JSON.stringify(status)).toBeLessThan(20);
          await new Promise((resolve) => setTimeout(resolve, 500));
        }
      }
    }

    // No reader saw a value go back in time, during the faults or the heal.
    expect(readers.stop()).toEqual([]);

    // The faults did happen: connections reset and answers cut while rounds ran.
    expect(stations.reduce((n, s) => n + s.proxy.stats.resets, 0)).toBeGreaterThan(0);
    expect(stations.reduce((n, s) => n + s.proxy.stats.cut, 0)).toBeGreaterThan(0);
    const acknowledged = stations.reduce((n, s) => n + s.verdicts, 0);
    process.stderr.write(`workload: ${acknowledged} verdicts, ${stations.reduce((n, s) => n + s.uploaded.length, 0)} uploads acknowledged; proxies reset ${stations.reduce((n, s) => n + s.proxy.stats.resets, 0)} connections and cut ${stations.reduce((n, s) => n + s.proxy.stats.cut, 0)} answers\n`);
    const count = async (dir: string, sql: string, url: string | null = null): Promise<number> => Number((await queryFolder<{ n: number }>(dir, sql, [], url))[0]?.n);
    expect(acknowledged).toBeGreaterThan(20);
    expect(await count(place.dataDir, 'SELECT COUNT(*) AS n FROM review_events', place.databaseUrl)).toBe(acknowledged);
    for (const s of stations) expect(await count(s.data, 'SELECT COUNT(*) AS n FROM review_events')).toBe(acknowledged);

    // The same events and the same verdicts everywhere.
    const hubDigest = await digestOf(place.dataDir, shared, place.databaseUrl);
    for (const s of stations) {
      const d = await digestOf(s.data, shared);
      expect(d.review).toEqual(hubDigest.review);
      expect(d.analysis).toEqual(hubDigest.analysis);
      expect(d.instance).toEqual(hubDigest.instance);
    }
    // Each verdict shown is the one the hub's events derive.
    const events = await queryFolder<ReviewEventRow & { public_id: string; review: string | null }>(place.dataDir,
      'SELECT e.*, f.public_id, f.review FROM review_events e JOIN findings f ON f.id = e.finding_ref', [], place.databaseUrl);
    const byFinding = new Map<string, typeof events>();
    for (const e of events) byFinding.set(e.public_id, [...(byFinding.get(e.public_id) ?? []), e]);
    for (const [, list] of byFinding) expect(list[0]!.review).toBe(deriveVerdict(list).current?.verdict ?? null);

    // Every acknowledged upload is on the hub, once; the hub's log holds each change once.
    const uploaded = stations.reduce((n, s) => n + s.uploaded.length, 0);
    const sharedInstances = files(join(work, 'shared')).length;
    expect(await count(place.dataDir, 'SELECT COUNT(*) AS n FROM instances', place.databaseUrl)).toBe(sharedInstances + uploaded);
    for (const s of stations) {
      const own = (await queryFolder<{ study_uid: string }>(s.data, 'SELECT study_uid FROM studies ORDER BY study_uid')).map((r) => r.study_uid);
      const [there, here] = [await digestOf(place.dataDir, own, place.databaseUrl), await digestOf(s.data, own)];
      // Its instances, and every analysis it ran (the shared one, its own series' during the faults).
      expect(there.instance).toEqual(here.instance);
      expect(there.analysis).toEqual(here.analysis);
    }
    const analysed = stations.reduce((n, s) => n + s.analyses.length, 0);
    process.stderr.write(`workload: ${analysed} analyses run during the faults\n`);
    expect(analysed).toBeGreaterThan(0);
    const onHub = new Set((await queryFolder<{ public_id: string }>(place.dataDir, "SELECT public_id FROM analyses WHERE status = 'succeeded'", [], place.databaseUrl)).map((r) => r.public_id));
    for (const s of stations) for (const id of s.analyses) expect(onHub.has(id), `analysis ${id} is on the hub`).toBe(true);
    // Every instance row on the hub has its file, with the bytes its digest names.
    const rows = await queryFolder<{ file_sha256: string }>(place.dataDir, 'SELECT file_sha256 FROM instances', [], place.databaseUrl);
    for (const r of rows) expect(createHash('sha256').update(readFileSync(join(place.dataDir, archivePathFor(r.file_sha256)))).digest('hex')).toBe(r.file_sha256);
    expect(await count(place.dataDir, "SELECT COUNT(DISTINCT entity_key) AS n FROM sync_changes WHERE entity = 'review'", place.databaseUrl)).toBe(acknowledged);

    // Reports: the same everywhere; nothing signed lost or unsigned; a draft shows its newest words.
    const signings = [...reports.values()].reduce((n, r) => n + r.signed.length, 0);
    process.stderr.write(`workload: ${reports.size} reports, ${[...reports.values()].reduce((n, r) => n + r.edits.length, 0)} impressions, ${signings} signings acknowledged\n`);
    expect(reports.size).toBeGreaterThan(0);
    for (const s of stations) expect(await digestDifference({ dir: s.data }, { dir: place.dataDir, url: place.databaseUrl }, shared)).toEqual([]);
    for (const s of stations) expect((await digestOf(s.data, shared)).report).toEqual(hubDigest.report);
    const hubReports = await queryFolder<{ public_id: string; status: string; impression: string; id: number }>(place.dataDir, 'SELECT id, public_id, status, impression FROM reports', [], place.databaseUrl);
    expect(hubReports.map((r) => r.public_id).sort()).toEqual([...reports.keys()].sort());
    const addenda = await queryFolder<{ report_ref: number; text: string }>(place.dataDir, 'SELECT report_ref, text FROM report_addenda', [], place.databaseUrl);
    const changes = await queryFolder<{ entity_key: string; hlc: string; payload: string }>(place.dataDir, "SELECT entity_key, hlc, payload FROM sync_changes WHERE entity = 'report'", [], place.databaseUrl);
    for (const r of hubReports) {
      const oracle = reports.get(r.public_id)!;
      // Every acknowledged impression reached the hub's log.
      const written = changes.filter((c) => c.entity_key === r.public_id).map((c) => ({ hlc: c.hlc, payload: JSON.parse(c.payload) as { fields: { impression?: string } } }));
      const impressions = written.filter((c) => c.payload.fields.impression !== undefined).sort((a, b) => (a.hlc < b.hlc ? -1 : 1));
      expect(impressions.map((c) => c.payload.fields.impression).sort()).toEqual([...oracle.edits].sort());
      if (oracle.signed.length === 0) {
        // A draft holds the impression written last, by HLC.
        expect(r.status).toBe('draft');
        expect(r.impression).toBe(impressions.at(-1)!.payload.fields.impression);
      } else {
        // Signed stays signed, and every signed text is the report or one of its addenda.
        expect(r.status).toBe('final');
        const texts = [r.impression, ...addenda.filter((a) => a.report_ref === r.id).map((a) => a.text)];
        for (const signed of oracle.signed) expect(texts.some((t) => t === signed || t.includes(`Impression:\n${signed}\n`)), `${r.public_id}: ${signed}`).toBe(true);
      }
    }

    // Audit trails: each workstation's, as far as it has sent, is on the hub whole, with no gap.
    const devices = (await queryFolder<{ device_id: string; name: string }>(place.dataDir, 'SELECT device_id, name FROM devices', [], place.databaseUrl));
    expect(await count(place.dataDir, 'SELECT COUNT(*) AS n FROM audit_gaps', place.databaseUrl)).toBe(0);
    for (const [i, s] of stations.entries()) {
      const deviceId = devices.find((d) => d.name === `ws${i + 1}`)!.device_id;
      const upTo = Number((await queryFolder<{ value: string }>(s.data, "SELECT value FROM settings WHERE key = 'sync.audit_pushed'"))[0]?.value ?? 0);
      const own = (await queryFolder<{ id: number; action: string; at: string; count: number }>(s.data, 'SELECT id, action, at, count FROM audit_events WHERE device_id IS NULL AND id <= ? ORDER BY id', [upTo])).map((e) => `${e.id} ${e.action} ${e.at} ${e.count}`);
      const there = (await queryFolder<{ device_seq: number; action: string; at: string; count: number }>(place.dataDir, 'SELECT device_seq, action, at, count FROM audit_events WHERE device_id = ? ORDER BY device_seq', [deviceId], place.databaseUrl)).map((e) => `${Number(e.device_seq)} ${e.action} ${e.at} ${Number(e.count)}`);
      expect(own.length).toBeGreaterThan(10);
      expect(there).toEqual(own);
    }
  }, WORKLOAD_MS + 370_000);
});
