/**
 * A seeded random workload under faults (issue 13), checked by an oracle that records what each
 * workstation acknowledged. Three workstations (`mia serve`, a sync round every second), each
 * reaching the hub through its own fault proxy whose plan changes every few seconds (delay with
 * jitter, a partition, resets, a push's answer cut after the hub committed, an answer cut after
 * N bytes); readers record verdicts on the findings all three hold and upload new instances.
 * After the network heals and every workstation has synced:
 *
 * - no acknowledged write is lost: every verdict is an event on the hub and on every workstation,
 *   every uploaded instance is on the hub, each once;
 * - every replica holds the same verdict events and shows the same verdict, which is the one the
 *   hub's own events derive (the highest HLC among the heads);
 * - repeated pushes left no duplicate change in the hub's log.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deriveVerdict } from '#server/scans/verdict-events.ts';
import type { ReviewEventRow } from '#server/store/review-events.ts';
import { phantomDicom } from '../analysis/analysis-helpers.ts';
import { startFaultProxy, type FaultPlan, type FaultProxy } from '../helpers/fault-proxy.ts';
import { freshPostgresDatabase } from '../helpers/postgres-cluster.ts';
import { digestOf, hubArgs, lastLine, mia, queryFolder, request, startHub, startWorkstation, type Hub, type HubPlace } from './harness.ts';
import { seededRandom } from '../helpers/random.ts';

const ON_POSTGRES = process.env['MIA_TEST_BACKEND'] === 'postgres';
const SEED = 13_013;
const WORKLOAD_MS = 30_000;


type Station = { data: string; proxy: FaultProxy; server: Hub; key: string; files: string[]; uploaded: string[]; verdicts: number };

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
  await phantomDicom(work, 'shared', { seed: 20_013_300, series: 2, modality: 'CT', slices: 10, size: 128, kinds: 'hemorrhage,tumor' });
  await phantomDicom(work, 'extra', { seed: 20_013_400, series: 3, modality: 'CT', slices: 6, size: 64 });
  const extra = readdirSync(join(work, 'extra')).sort();
  for (let i = 0; i < 3; i++) {
    const data = join(work, `ws${i + 1}`);
    const key = lastLine((await mia(['devices', 'enroll', `ws${i + 1}`, ...hubArgs(place)])).stdout);
    const proxy = await startFaultProxy({ host: '127.0.0.1', port: hub.port }, SEED + i);
    expect((await mia(['sync', 'join', proxy.url, '--data', data], { input: key })).status).toBe(0);
    expect((await mia(['import', join(work, 'shared'), '--data', data])).status).toBe(0);
    stations.push({ data, proxy, server: undefined as unknown as Hub, key: '', files: files(join(work, 'extra', extra[i]!)), uploaded: [], verdicts: 0 });
  }
  // The reader is the hub's user; the key the hub gave them works on every workstation once
  // it has synced (the hub's users and keys come down with each round).
  const readerKey = lastLine((await mia(['keys', 'create', '--role', 'radiologist', '--email', 'reader@hub.test', '--scopes', 'write:scans', ...hubArgs(place)])).stdout);
  // One workstation analyses; all three then hold the same findings.
  expect((await mia(['analyze', '--all', '--data', stations[0]!.data], { timeoutMs: 300_000 })).status).toBe(0);
  for (const s of [stations[0]!, stations[1]!, stations[2]!]) expect((await mia(['sync', 'now', '--data', s.data])).status).toBe(0);
  for (const s of stations) {
    s.key = readerKey;
    s.server = await startWorkstation(s.data, 1);
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
    const findings = (await queryFolder<{ public_id: string }>(stations[0]!.data, "SELECT public_id FROM findings WHERE source = 'model' ORDER BY public_id")).map((r) => r.public_id);
    expect(findings.length).toBeGreaterThan(0);
    const started = performance.now();
    let nextPlanAt = 0;
    while (performance.now() - started < WORKLOAD_MS) {
      if (performance.now() - started >= nextPlanAt) {
        for (const s of stations) s.proxy.set(PLANS[Math.floor(random() * PLANS.length)]!);
        nextPlanAt += 2000 + random() * 2000;
      }
      const s = stations[Math.floor(random() * stations.length)]!;
      if (random() < 0.8 || s.files.length === 0) {
        const finding = findings[Math.floor(random() * findings.length)]!;
        const reply = await request(s.server.url, s.key, 'PATCH', `/v1/findings/${finding}`, { body: { review: random() < 0.5 ? 'accepted' : 'rejected' } });
        // A final report would lock the verdict; none is written here, so each one is taken.
        expect(reply.status, reply.text).toBe(200);
        s.verdicts += 1;
      } else {
        const file = s.files.shift()!;
        const reply = await fetch(`${s.server.url}/v1/instances`, { method: 'POST', headers: { authorization: `Bearer ${s.key}`, 'content-type': 'application/dicom' }, body: readFileSync(file) });
        expect(reply.status, await reply.text()).toBeLessThan(300);
        s.uploaded.push(file);
      }
      await new Promise((resolve) => setTimeout(resolve, random() * 150));
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
      expect((await digestOf(place.dataDir, own, place.databaseUrl)).instance).toEqual((await digestOf(s.data, own)).instance);
    }
    expect(await count(place.dataDir, "SELECT COUNT(DISTINCT entity_key) AS n FROM sync_changes WHERE entity = 'review'", place.databaseUrl)).toBe(acknowledged);
  }, 400_000);
});
