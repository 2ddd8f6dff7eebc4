/**
 * Sync between real processes (issue 13): one `mia serve --hub`, two workstations (data folders
 * worked by the `mia` CLI as a radiologist's machine would be), each reaching the hub through a
 * fault proxy. Checked against what was acknowledged, not against the code's own view: rows and
 * digests on each side, counts in the hub's change log, and the hub's answers.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDataFolder } from '#server/data-folder.ts';
import { blobPath } from '#server/sync/blobs.ts';
import { uuid7 } from '#server/sync/uuid7.ts';
import { phantomDicom } from '../analysis/analysis-helpers.ts';
import { startFaultProxy, type FaultProxy } from '../helpers/fault-proxy.ts';
import { freshPostgresDatabase } from '../helpers/postgres-cluster.ts';
import { digestDifference, digestOf, hubArgs, lastLine, mia, miaProcess, queryFolder, request, startHub, startWorkstation, type Hub, type HubPlace } from './harness.ts';

/** The vitest project sync-postgres runs this file again with the hub on PostgreSQL. */
const ON_POSTGRES = process.env['MIA_TEST_BACKEND'] === 'postgres';

const SERIES = 2;
const SLICES = 12;

let work: string;
let hub: Hub;
let hubData: string;
let place: HubPlace;
let adminKey: string;
const ws = [{ data: '', key: '', proxy: undefined as unknown as FaultProxy }, { data: '', key: '', proxy: undefined as unknown as FaultProxy }];
let studies: string[] = [];

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'mia-sync-'));
  hubData = join(work, 'hub');
  place = { dataDir: hubData, databaseUrl: ON_POSTGRES ? await freshPostgresDatabase() : null };
  hub = await startHub(place);
  adminKey = lastLine((await mia(['keys', 'create', '--role', 'admin', '--email', 'admin@hub.test', ...hubArgs(place)])).stdout);
  for (const [i, w] of ws.entries()) {
    w.data = join(work, `ws${i + 1}`);
    const enrolled = await mia(['devices', 'enroll', `reading room ${i + 1}`, ...hubArgs(place)]);
    expect(enrolled.status, enrolled.stderr).toBe(0);
    w.key = lastLine(enrolled.stdout);
    w.proxy = await startFaultProxy({ host: '127.0.0.1', port: hub.port }, 100 + i);
    const joined = await mia(['sync', 'join', w.proxy.url, '--data', w.data], { input: w.key + '\n' });
    expect(joined.status, joined.stderr).toBe(0);
    expect(joined.stdout).toMatch(/linked to .* as device [0-9a-f-]{36}/);
  }
  await phantomDicom(work, 'series', { seed: 20_013_100, series: SERIES, modality: 'CT', slices: SLICES, size: 128 });
}, 240_000);

afterAll(async () => {
  for (const w of ws) await w.proxy?.close();
  await hub?.stop();
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

const hubCount = async (sql: string): Promise<number> => Number((await queryFolder<{ n: number }>(hubData, sql, [], place.databaseUrl))[0]?.n);

describe('a workstation and its hub', () => {
  it('keeps its work while the hub is unreachable, and says so', async () => {
    const [w] = ws;
    const imported = await mia(['import', join(work, 'series'), '--data', w!.data]);
    expect(imported.status, imported.stderr).toBe(0);
    const analysed = await mia(['analyze', '--all', '--data', w!.data], { timeoutMs: 300_000 });
    expect(analysed.status, analysed.stderr).toBe(0);
    studies = (await queryFolder<{ study_uid: string }>(w!.data, 'SELECT study_uid FROM studies ORDER BY study_uid')).map((r) => r.study_uid);

    w!.proxy.set({ reset: true });
    const failed = await mia(['sync', 'now', '--data', w!.data]);
    expect(failed.status, failed.stderr).toBe(1);
    expect(failed.stderr).toMatch(/hub unreachable/);
    const status = await mia(['sync', 'status', '--data', w!.data]);
    // Every instance and both analyses wait, with the error named.
    expect(status.stdout).toMatch(new RegExp(`offline\\s+${SERIES * SLICES + SERIES}\\s+0`));
    expect(status.stdout).toMatch(/hub unreachable/);
    expect(await hubCount('SELECT COUNT(*) AS n FROM instances')).toBe(0);
  }, 400_000);

  it('loses nothing and duplicates nothing when the hub commits but its answer is lost', async () => {
    const [w] = ws;
    w!.proxy.set({ cutAnswerTo: 'POST /v1/sync/push' });
    const cut = await mia(['sync', 'now', '--data', w!.data]);
    expect(cut.status).toBe(1);
    // The hub took the batch (files first, then rows), though the workstation never heard.
    expect(await hubCount('SELECT COUNT(*) AS n FROM instances')).toBe(SERIES * SLICES);
    const pendingAfterCut = await queryFolder<{ n: number }>(w!.data, 'SELECT COUNT(*) AS n FROM sync_changes WHERE push_state IS NULL');
    expect(pendingAfterCut[0]?.n).toBe(SERIES * SLICES + SERIES);

    w!.proxy.set({});
    const ok = await mia(['sync', 'now', '--data', w!.data]);
    expect(ok.status, ok.stderr + ok.stdout).toBe(0);
    expect(ok.stdout).toMatch(new RegExp(`pushed ${SERIES * SLICES + SERIES} change\\(s\\) and 0 file\\(s\\)`));
    expect(await hubCount('SELECT COUNT(*) AS n FROM instances')).toBe(SERIES * SLICES);
    expect(await hubCount("SELECT COUNT(*) AS n FROM analyses WHERE status = 'succeeded'")).toBe(SERIES);
    expect(await hubCount('SELECT COUNT(*) AS n FROM sync_changes')).toBe(SERIES * SLICES + SERIES);

    // Same instances, files, analyses and finding ids on both sides.
    expect(await digestOf(hubData, studies, place.databaseUrl)).toEqual(await digestOf(w!.data, studies));
    const files = await queryFolder<{ file_sha256: string }>(hubData, 'SELECT file_sha256 FROM instances', [], place.databaseUrl);
    const archived = new Set(readdirSync(join(hubData, 'archive'), { recursive: true }).map(String).filter((n) => n.endsWith('.dcm')).map((n) => n.slice(-68, -4)));
    expect(files.every((f) => archived.has(f.file_sha256))).toBe(true);

    // Nothing left to send; a second round sends nothing.
    const again = await mia(['sync', 'now', '--data', w!.data]);
    expect(again.stdout).toMatch(/pushed 0 change\(s\) and 0 file\(s\)/);
    expect(await hubCount('SELECT COUNT(*) AS n FROM sync_changes')).toBe(SERIES * SLICES + SERIES);
    // The hub's reader sees the workstation's result.
    const scans = await request(hub.url, adminKey, 'GET', '/v1/scans?limit=10');
    expect(scans.json.data.items.map((s: { status: string }) => s.status)).toEqual(Array(SERIES).fill('analyzed'));
  }, 240_000);

  it('brings one workstation\'s analyses to another that holds the same study', async () => {
    const [w1, w2] = ws;
    const imported = await mia(['import', join(work, 'series'), '--data', w2!.data]);
    expect(imported.status, imported.stderr).toBe(0);
    const synced = await mia(['sync', 'now', '--data', w2!.data]);
    expect(synced.status, synced.stderr).toBe(0);
    // Its instances were the hub's already (same files): accepted, nothing stored twice.
    expect(await hubCount('SELECT COUNT(*) AS n FROM instances')).toBe(SERIES * SLICES);
    // It pulled ws1's instance and analysis changes; the instances it holds itself are known.
    expect(synced.stdout).toMatch(new RegExp(`pulled ${SERIES * SLICES + SERIES}, applied ${SERIES * SLICES + SERIES}$`, 'm'));
    const findings = async (dir: string): Promise<string[]> => (await queryFolder<{ public_id: string }>(dir, 'SELECT public_id FROM findings ORDER BY public_id')).map((r) => r.public_id);
    expect(await findings(w2!.data)).toEqual(await findings(w1!.data));
    expect(await digestOf(w2!.data, studies)).toEqual(await digestOf(w1!.data, studies));
    const statuses = await queryFolder<{ status: string }>(w2!.data, 'SELECT status FROM scans');
    expect(statuses.map((s) => s.status)).toEqual(Array(SERIES).fill('analyzed'));
    // A pulled change is not pushed back.
    const again = await mia(['sync', 'now', '--data', w1!.data]);
    expect(again.stdout).toMatch(/pushed 0 change\(s\)/);
  }, 240_000);
  it('keeps verdicts made apart, shows them disputed everywhere, and settles them with a later verdict', async () => {
    const [w1, w2] = ws;
    const servers = [await startWorkstation(w1!.data), await startWorkstation(w2!.data)];
    try {
      let keys = await Promise.all(ws.map(async (w) => lastLine((await mia(['keys', 'create', '--role', 'radiologist', '--email', 'reader@ws.test', '--data', w.data])).stdout)));
      // The reader is the hub's user too: at the next round each workstation's local reader of
      // that email becomes the hub's, so verdicts made here name one person everywhere; from then
      // on they sign in with the hub's key, and the keys made on the workstations stop working.
      const hubKey = lastLine((await mia(['keys', 'create', '--role', 'radiologist', '--email', 'reader@ws.test', ...hubArgs(place)])).stdout);
      const findingId = (await queryFolder<{ public_id: string }>(w1!.data, "SELECT public_id FROM findings WHERE source = 'model' ORDER BY public_id LIMIT 1"))[0]!.public_id;
      const review = async (i: number, verdict: string): Promise<void> => {
        const reply = await request(servers[i]!.url, keys[i]!, 'PATCH', `/v1/findings/${findingId}`, { body: { review: verdict } });
        expect(reply.status, reply.text).toBe(200);
      };
      const findingOn = async (url: string, key: string): Promise<{ review: string | null; review_disputed?: boolean }> => {
        const scan = (await queryFolder<{ scan_id: string }>(w1!.data, 'SELECT s.scan_id FROM findings f JOIN analyses a ON a.id = f.analysis_ref JOIN scans s ON s.id = a.scan_ref WHERE f.public_id = ?', [findingId]))[0]!.scan_id;
        const result = await request(url, key, 'GET', `/v1/scans/${scan}/results`, { headers: { 'api-version': '1.1' } });
        return result.json.data.findings.find((f: { id: string }) => f.id === findingId);
      };
      const sync = async (w: (typeof ws)[number]): Promise<void> => {
        const run = await mia(['sync', 'now', '--data', w.data]);
        expect(run.status, run.stderr + run.stdout).toBe(0);
      };

      // Offline, two readers disagree; the second verdict is the later one.
      await review(0, 'accepted');
      await review(1, 'rejected');
      await sync(w1!);
      await sync(w2!);
      await sync(w1!);
      for (const [i, s] of servers.entries()) expect((await request(s.url, keys[i]!, 'GET', '/v1/scans')).status).toBe(401);
      keys = [hubKey, hubKey];
      for (const [i, s] of servers.entries()) expect(await findingOn(s.url, keys[i]!)).toMatchObject({ review: 'rejected', review_disputed: true });
      expect(await findingOn(hub.url, adminKey)).toMatchObject({ review: 'rejected', review_disputed: true });
      const reviews = async (dir: string, url: string | null = null) => (await digestOf(dir, studies, url)).review;
      expect((await reviews(w1!.data)).count).toBe(2);
      expect(await reviews(w2!.data)).toEqual(await reviews(w1!.data));
      expect(await reviews(hubData, place.databaseUrl)).toEqual(await reviews(w1!.data));

      // A reader who has seen both decides; every replica follows, with the history whole.
      await review(0, 'accepted');
      await sync(w1!);
      await sync(w2!);
      for (const [i, s] of servers.entries()) {
        const f = await findingOn(s.url, keys[i]!);
        expect(f.review).toBe('accepted');
        expect(f.review_disputed).toBeUndefined();
      }
      expect((await reviews(w2!.data)).count).toBe(3);
      expect(await reviews(w2!.data)).toEqual(await reviews(w1!.data));
      expect(await reviews(hubData, place.databaseUrl)).toEqual(await reviews(w1!.data));
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  }, 240_000);

  it('brings a verdict to another workstation within seconds through the hub\'s live stream, long before its interval', async () => {
    const [w1, w2] = ws;
    // ws2 syncs every 2 minutes on its own; only the live stream can bring the verdict sooner.
    const listening = await startWorkstation(w2!.data, 120);
    const writer = await startWorkstation(w1!.data);
    try {
      const key = lastLine((await mia(['keys', 'create', '--role', 'radiologist', '--email', 'reader@ws.test', ...hubArgs(place)])).stdout);
      expect((await mia(['sync', 'now', '--data', w1!.data])).status).toBe(0);
      const events = async (): Promise<number> => Number((await queryFolder<{ n: number }>(w2!.data, 'SELECT COUNT(*) AS n FROM review_events'))[0]?.n);
      const before = await events();
      const findingId = (await queryFolder<{ public_id: string }>(w1!.data, "SELECT public_id FROM findings WHERE source = 'model' ORDER BY public_id DESC LIMIT 1"))[0]!.public_id;
      expect((await request(writer.url, key, 'PATCH', `/v1/findings/${findingId}`, { body: { review: 'accepted' } })).status).toBe(200);
      const started = Date.now();
      expect((await mia(['sync', 'now', '--data', w1!.data])).status).toBe(0);
      for (let waited = 0; (await events()) === before; waited += 100) {
        expect(waited, 'the verdict did not reach ws2 through the live stream').toBeLessThan(20_000);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      process.stderr.write(`live sync: the verdict reached the other workstation ${Date.now() - started} ms after the push began\n`);
    } finally {
      await writer.stop();
      await listening.stop();
    }
  }, 120_000);

  it('merges report drafts field by field, and keeps both signings and a late edit when a report is signed twice apart', async () => {
    const [w1, w2] = ws;
    const servers = [await startWorkstation(w1!.data), await startWorkstation(w2!.data)];
    try {
      const key = lastLine((await mia(['keys', 'create', '--role', 'radiologist', '--email', 'reader@ws.test', ...hubArgs(place)])).stdout);
      const sync = async (w: (typeof ws)[number]): Promise<void> => {
        const run = await mia(['sync', 'now', '--data', w.data]);
        expect(run.status, run.stderr + run.stdout).toBe(0);
      };
      await sync(w1!);
      await sync(w2!);
      const scan = (await queryFolder<{ scan_id: string }>(w1!.data, 'SELECT scan_id FROM scans WHERE latest_analysis_ref IS NOT NULL ORDER BY scan_id LIMIT 1'))[0]!.scan_id;
      const call = async (i: number, method: string, path: string, body?: unknown) => {
        const reply = await request(servers[i]!.url, key, method, path, body === undefined ? {} : { body });
        expect(reply.status, reply.text).toBeLessThan(300);
        return reply.json.data;
      };
      const drafted = await call(0, 'POST', '/v1/reports', { scan_id: scan, impression: 'first words' });
      const id = drafted.id as string;
      await sync(w1!);
      await sync(w2!);
      expect((await call(1, 'GET', `/v1/reports/${id}`)).impression).toBe('first words');

      // Apart: ws2 rewrites the impression, ws1 writes its own recommendation; both stand.
      await call(1, 'PATCH', `/v1/reports/${id}`, { impression: 'impression from ws2' });
      await call(0, 'PATCH', `/v1/reports/${id}`, { recommendation: 'recommendation from ws1' });
      for (const w of [w1!, w2!, w1!]) await sync(w);
      for (const i of [0, 1]) expect(await call(i, 'GET', `/v1/reports/${id}`)).toMatchObject({ status: 'draft', impression: 'impression from ws2', recommendation: 'recommendation from ws1', recommendation_basis: 'reader' });

      // Apart again: ws1 signs; then ws2 (not knowing) edits and signs too.
      await call(0, 'PATCH', `/v1/reports/${id}`, { status: 'final' });
      await call(1, 'PATCH', `/v1/reports/${id}`, { impression: 'a late thought on ws2' });
      await call(1, 'PATCH', `/v1/reports/${id}`, { status: 'final' });
      for (const w of [w1!, w2!, w1!]) await sync(w);
      const seen = [await call(0, 'GET', `/v1/reports/${id}`), await call(1, 'GET', `/v1/reports/${id}`), (await request(hub.url, adminKey, 'GET', `/v1/reports/${id}`)).json.data];
      for (const r of seen) {
        // The earlier signing is the report; the later one is an addendum; the late edit is shown.
        expect(r).toMatchObject({ status: 'final', impression: 'impression from ws2', recommendation: 'recommendation from ws1' });
        expect(r.addenda).toHaveLength(1);
        expect(r.addenda[0].text).toMatch(/^Signed separately at .*Impression:\na late thought on ws2/s);
        expect(r.conflicts.map((c: { field: string; value: string }) => [c.field, c.value])).toEqual([['impression', 'a late thought on ws2']]);
      }
      const reports = async (dir: string, url: string | null = null) => (await digestOf(dir, studies, url)).report;
      expect(await reports(w2!.data)).toEqual(await reports(w1!.data));
      expect(await reports(hubData, place.databaseUrl)).toEqual(await reports(w1!.data));
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  }, 240_000);

  it('archives a scan on every workstation when one archives it', async () => {
    const [w1, w2] = ws;
    const servers = [await startWorkstation(w1!.data), await startWorkstation(w2!.data)];
    try {
      const sync = async (w: (typeof ws)[number]): Promise<void> => {
        const run = await mia(['sync', 'now', '--data', w.data]);
        expect(run.status, run.stderr + run.stdout).toBe(0);
      };
      const scan = (await queryFolder<{ scan_id: string }>(w1!.data, 'SELECT scan_id FROM scans WHERE latest_analysis_ref IS NOT NULL ORDER BY scan_id DESC LIMIT 1'))[0]!.scan_id;
      const statusOn = async (dir: string, url: string | null = null): Promise<string> => (await queryFolder<{ status: string }>(dir, 'SELECT status FROM scans WHERE scan_id = ?', [scan], url))[0]!.status;
      // The hub's admin (their key came down with the directory) archives it on ws1.
      const archived = await request(servers[0]!.url, adminKey, 'POST', `/v1/scans/${scan}`, { body: { status: 'archived' } });
      expect(archived.status, archived.text).toBe(200);
      for (const w of [w1!, w2!]) await sync(w);
      expect(await statusOn(w2!.data)).toBe('archived');
      expect(await statusOn(hubData, place.databaseUrl)).toBe('archived');

      // Archived is where a scan's life ends (no state leaves it): ws2 cannot send it back, and a
      // verdict synced later does not move it either.
      expect((await request(servers[1]!.url, adminKey, 'POST', `/v1/scans/${scan}`, { body: { status: 'in_review' } })).status).toBe(409);
      expect(await digestDifference({ dir: w1!.data }, { dir: w2!.data }, studies)).toEqual([]);
    } finally {
      await Promise.all(servers.map((s) => s.stop()));
    }
  }, 240_000);

  it('takes an assigned study offline: a new workstation fetches its files, and its analyses, verdicts and report follow', async () => {
    const data = join(work, 'ws3');
    const enrolled = await mia(['devices', 'enroll', 'reading room 3', ...hubArgs(place)]);
    const proxy = await startFaultProxy({ host: '127.0.0.1', port: hub.port }, 103);
    try {
      expect((await mia(['sync', 'join', proxy.url, '--data', data], { input: lastLine(enrolled.stdout) + '\n' })).status).toBe(0);
      // Not assigned yet: everything is pulled, but no study can be read here without its files.
      const first = await mia(['sync', 'now', '--data', data]);
      expect(first.status, first.stderr).toBe(0);
      expect(Number((await queryFolder<{ n: number }>(data, 'SELECT COUNT(*) AS n FROM instances'))[0]?.n)).toBe(0);
      const waiting = Number((await queryFolder<{ n: number }>(data, 'SELECT COUNT(*) AS n FROM sync_inbox'))[0]?.n);
      expect(waiting).toBeGreaterThan(0);
      // A round that brings nothing leaves them alone: they wait for files that are not coming
      // (at a hospital's scale, millions of changes tried again every few seconds).
      const idle = await mia(['sync', 'now', '--data', data]);
      expect(idle.status, idle.stderr).toBe(0);
      expect(idle.stdout).toContain(`${waiting} pulled change(s) waiting for files or records not here yet`);
      expect(idle.stdout).toMatch(/; 0 tried again this round$/m);

      const study = studies[0]!;
      const assigned = await mia(['devices', 'assign', 'reading room 3', study, ...hubArgs(place)]);
      expect(assigned.status, assigned.stderr).toBe(0);
      const fetched = await mia(['sync', 'now', '--data', data]);
      expect(fetched.status, fetched.stderr + fetched.stdout).toBe(0);
      const files = Number((await queryFolder<{ n: number }>(hubData, 'SELECT COUNT(*) AS n FROM instances i JOIN scans s ON s.id = i.scan_ref JOIN studies st ON st.id = s.study_ref WHERE st.study_uid = ?', [study], place.databaseUrl))[0]?.n);
      expect(fetched.stdout).toMatch(new RegExp(`fetched ${files} file\\(s\\) of assigned studies`));
      // The study here is the hub's: instances with their files, analyses, verdicts, report.
      expect(await digestDifference({ dir: data }, { dir: hubData, url: place.databaseUrl }, [study])).toEqual([]);
      expect((await digestOf(data, [study])).analysis.count).toBeGreaterThan(0);

      // And it reads with the hub away.
      proxy.set({ reset: true });
      const server = await startWorkstation(data);
      try {
        const key = lastLine((await mia(['keys', 'create', '--role', 'radiologist', '--email', 'offline@ws.test', '--data', data])).stdout);
        const scan = (await queryFolder<{ scan_id: string }>(data, 'SELECT s.scan_id FROM scans s JOIN studies st ON st.id = s.study_ref WHERE st.study_uid = ? AND s.latest_analysis_ref IS NOT NULL LIMIT 1', [study]))[0]!.scan_id;
        const result = await request(server.url, key, 'GET', `/v1/scans/${scan}/results`);
        expect(result.status, result.text).toBe(200);
        const instance = (await request(server.url, key, 'GET', `/v1/scans/${scan}/instances?limit=1`)).json.data.items[0].instance_uid as string;
        const image = await fetch(`${server.url}/v1/instances/${instance}/frames/0/rendered`, { headers: { authorization: `Bearer ${key}` } });
        expect(image.status).toBe(200);
        expect((await image.arrayBuffer()).byteLength).toBeGreaterThan(100);
      } finally {
        await server.stop();
      }
      const assignments = await request(hub.url, adminKey, 'GET', '/v1/sync/assignments');
      expect(assignments.json.data.items).toEqual([expect.objectContaining({ study_uid: study, device_name: 'reading room 3' })]);
    } finally {
      await proxy.close();
    }
  }, 240_000);

  it('signs in the hub\'s users on a workstation, offline too, and quarantines what a user did after the hub disabled them', async () => {
    const [w1] = ws;
    const server = await startWorkstation(w1!.data);
    try {
      const created = await mia(['keys', 'create', '--role', 'radiologist', '--email', 'dr.b@hub.test', ...hubArgs(place)]);
      expect(created.status, created.stderr).toBe(0);
      const key = lastLine(created.stdout);
      expect((await request(server.url, key, 'GET', '/v1/scans')).status).toBe(401);
      expect((await mia(['sync', 'now', '--data', w1!.data])).status).toBe(0);
      // The hub's key works here now, with the hub's role; the user is the hub's to change.
      expect((await request(server.url, key, 'GET', '/v1/scans')).status).toBe(200);
      const users = await request(hub.url, adminKey, 'GET', '/v1/users?limit=100');
      const drB = users.json.data.items.find((u: { email: string }) => u.email === 'dr.b@hub.test');
      const local = await queryFolder<{ public_id: string; role: string; origin: string }>(w1!.data, "SELECT public_id, role, origin FROM users WHERE email = 'dr.b@hub.test'");
      expect(local).toEqual([{ public_id: drB.id, role: 'radiologist', origin: 'hub' }]);

      // Offline (no round in between), dr.b records a verdict; the hub disables dr.b; dr.b,
      // still signed in here, records another.
      const finding = (await queryFolder<{ public_id: string }>(w1!.data, "SELECT public_id FROM findings WHERE source = 'model' ORDER BY public_id LIMIT 1"))[0]!.public_id;
      const [f1, f2] = [finding, finding];
      expect((await request(server.url, key, 'PATCH', `/v1/findings/${f1}`, { body: { review: 'accepted' } })).status).toBe(200);
      const disabled = await request(hub.url, adminKey, 'PATCH', `/v1/users/${drB.id}`, { body: { status: 'disabled' } });
      expect(disabled.status, disabled.text).toBe(200);
      // The next verdict is stamped after the moment the hub recorded (same machine, same clock).
      const disabledAt = Date.parse(disabled.json.data.updated_at as string);
      while (Date.now() <= disabledAt) await new Promise((resolve) => setTimeout(resolve, 1));
      expect((await request(server.url, key, 'PATCH', `/v1/findings/${f2}`, { body: { review: 'rejected' } })).status).toBe(200);

      const synced = await mia(['sync', 'now', '--data', w1!.data]);
      expect(synced.stdout).toMatch(/refused 1;/);
      // The verdict made before the hub disabled dr.b stands; the one after is kept for an admin.
      const onHub = async (id: string): Promise<string | null> => (await queryFolder<{ review: string | null }>(hubData, 'SELECT review FROM findings WHERE public_id = ?', [id], place.databaseUrl))[0]!.review;
      expect(await onHub(f1!)).toBe('accepted');
      const events = await queryFolder<{ verdict: string; user_id: string }>(hubData, 'SELECT e.verdict, e.user_id FROM review_events e JOIN findings f ON f.id = e.finding_ref WHERE f.public_id = ? AND e.user_id = ?', [f1, drB.id], place.databaseUrl);
      expect(events).toEqual([{ verdict: 'accepted', user_id: drB.id }]);
      const quarantined = await request(hub.url, adminKey, 'GET', '/v1/sync/quarantine?limit=100');
      const item = quarantined.json.data.items.find((q: { entity: string }) => q.entity === 'review');
      expect(item.reason).toMatch(new RegExp(`^user ${drB.id} was disabled on the hub at .*, before this change was made`));
      // And dr.b is signed out here too.
      expect((await request(server.url, key, 'GET', '/v1/scans')).status).toBe(401);
      const localAdmin = lastLine((await mia(['keys', 'create', '--role', 'admin', '--email', 'local-admin@ws.test', '--data', w1!.data])).stdout);
      const edit = await request(server.url, localAdmin, 'PATCH', `/v1/users/${drB.id}`, { body: { status: 'active' } });
      expect(edit.status).toBe(409);
      expect(edit.json.error.message).toMatch(/managed by the hub/);
      // Nor may a workstation's admin make a key for a hub user: it would act as them at the hub.
      const reader = users.json.data.items.find((u: { email: string }) => u.email === 'reader@ws.test');
      const issued = await request(server.url, localAdmin, 'POST', '/v1/auth/keys', { body: { user_id: reader.id } });
      expect(issued.status).toBe(409);
      expect(issued.json.error.message).toMatch(/managed by the hub/);
    } finally {
      await server.stop();
    }
  }, 240_000);

  it('sends each workstation\'s audit trail up whole, and shows the hub a gap in it', async () => {
    const [w1] = ws;
    // The hub's name for this workstation (the link's device id).
    const deviceId = (await request(hub.url, adminKey, 'GET', '/v1/devices')).json.data.items.find((d: { name: string }) => d.name === 'reading room 1').id as string;
    const own = async (): Promise<string[]> => {
      const upTo = Number((await queryFolder<{ value: string }>(w1!.data, "SELECT value FROM settings WHERE key = 'sync.audit_pushed'"))[0]?.value ?? 0);
      return (await queryFolder<{ id: number; action: string; outcome: string; at: string; count: number }>(w1!.data, 'SELECT id, action, outcome, at, count FROM audit_events WHERE device_id IS NULL AND id <= ? ORDER BY id', [upTo]))
        .map((e) => `${e.id} ${e.action} ${e.outcome} ${e.at} ${e.count}`);
    };
    const onHub = async (): Promise<string[]> => (await queryFolder<{ device_seq: number; action: string; outcome: string; at: string; count: number }>(hubData, 'SELECT device_seq, action, outcome, at, count FROM audit_events WHERE device_id = ? ORDER BY device_seq', [deviceId], place.databaseUrl))
      .map((e) => `${Number(e.device_seq)} ${e.action} ${e.outcome} ${e.at} ${Number(e.count)}`);
    const gaps = async (): Promise<number> => (await request(hub.url, adminKey, 'GET', '/v1/devices')).json.data.items.find((d: { id: string }) => d.id === deviceId).audit_gap_events;

    // Two minutes on (faketime), the minutes of the refusals counted above have ended: all go.
    expect((await mia(['sync', 'now', '--data', w1!.data], { clockOffset: '+2m' })).status).toBe(0);
    const sent = await own();
    // The earlier tests' requests on this workstation's server: all of them, once each, no gap.
    expect(sent.length).toBeGreaterThan(10);
    expect(await onHub()).toEqual(sent);
    expect(await gaps()).toBe(0);

    // Three more events; one is lost here before it is sent (a restored backup, a hand in the file).
    const server = await startWorkstation(w1!.data);
    const key = lastLine((await mia(['keys', 'create', '--role', 'radiologist', '--email', 'auditee@ws.test', '--data', w1!.data])).stdout);
    try {
      for (let i = 0; i < 3; i++) expect((await request(server.url, key, 'GET', '/v1/scans')).status).toBe(200);
    } finally {
      await server.stop();
    }
    const newest = await queryFolder<{ id: number }>(w1!.data, "SELECT id FROM audit_events WHERE action = 'scans.list' ORDER BY id DESC LIMIT 3");
    expect(newest).toHaveLength(3);
    const folder = await openDataFolder(w1!.data);
    try {
      await folder.db.run('DELETE FROM audit_events WHERE id = ?', [newest[1]!.id]);
    } finally {
      await folder.close();
    }
    // Two minutes on, every counted row's minute (the refused keys above) has ended: all go.
    expect((await mia(['sync', 'now', '--data', w1!.data], { clockOffset: '+2m' })).status).toBe(0);
    expect(await gaps()).toBe(1);
    expect(await onHub()).toEqual(await own());
  }, 120_000);

  it('converges after the hub is killed with SIGKILL mid-push and restarted', async () => {
    const [w1] = ws;
    await phantomDicom(work, 'more', { seed: 20_013_200, series: 1, modality: 'CT', slices: SLICES, size: 128 });
    const imported = await mia(['import', join(work, 'more'), '--data', w1!.data]);
    expect(imported.status, imported.stderr).toBe(0);
    const before = await hubCount('SELECT COUNT(*) AS n FROM instances');

    // A slow link keeps the round in flight; the hub dies under it.
    w1!.proxy.set({ delayMs: 400 });
    const sentBefore = w1!.proxy.stats.bytesToTarget;
    const round = mia(['sync', 'now', '--data', w1!.data]);
    // In flight: its first request has reached the hub, and every answer is 400 ms on its way.
    for (let waited = 0; w1!.proxy.stats.bytesToTarget === sentBefore; waited += 20) {
      expect(waited, 'the round never reached the hub').toBeLessThan(60_000);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await hub.stop('SIGKILL');
    const cut = await round;
    expect(cut.status).toBe(1);
    expect(cut.stderr).toMatch(/hub unreachable/);

    hub = await startHub(place, hub.port);
    w1!.proxy.set({});
    const ok = await mia(['sync', 'now', '--data', w1!.data]);
    expect(ok.status, ok.stderr + ok.stdout).toBe(0);
    expect(await hubCount('SELECT COUNT(*) AS n FROM instances')).toBe(before + SLICES);
    const all = (await queryFolder<{ study_uid: string }>(w1!.data, 'SELECT study_uid FROM studies')).map((r) => r.study_uid);
    // (Verdicts differ on purpose: the hub quarantined one of dr.b's, made after being disabled.)
    const [onHub, onWs] = [await digestOf(hubData, all, place.databaseUrl), await digestOf(w1!.data, all)];
    expect({ instance: onHub.instance, analysis: onHub.analysis }).toEqual({ instance: onWs.instance, analysis: onWs.analysis });
    // What the killed hub was writing is gone with it (cleared when it started again). A hub on
    // PostgreSQL shares its folder with other nodes and clears such files by age only.
    const staging = join(hubData, 'archive', '.staging');
    const stagedFiles = existsSync(staging) ? readdirSync(staging, { recursive: true, withFileTypes: true }).filter((e) => e.isFile()) : [];
    if (!ON_POSTGRES) expect(stagedFiles.map((e) => e.name)).toEqual([]);
  }, 240_000);
  it('resumes a large file cut off mid-upload from where the hub\'s copy ends, not from its start', async () => {
    const [w1] = ws;
    await phantomDicom(work, 'large', { seed: 20_013_900, series: 1, modality: 'CT', slices: 1, size: 2600, kinds: 'none' });
    expect((await mia(['import', join(work, 'large'), '--data', w1!.data])).status).toBe(0);
    const size = (await queryFolder<{ file_size: number }>(w1!.data, 'SELECT file_size FROM instances ORDER BY id DESC LIMIT 1'))[0]!.file_size;
    expect(size).toBeGreaterThan(12 * 1024 * 1024);

    // The connection dies 4 MB into the first range: what arrived of it is on the hub, durable.
    w1!.proxy.set({ dropUploadAfterBytes: 4_000_000 });
    const cut = await mia(['sync', 'now', '--data', w1!.data]);
    expect(cut.status).toBe(1);
    w1!.proxy.set({});
    const sentBefore = w1!.proxy.stats.bytesToTarget;
    const resumed = await mia(['sync', 'now', '--data', w1!.data]);
    expect(resumed.status, resumed.stderr + resumed.stdout).toBe(0);
    const resent = w1!.proxy.stats.bytesToTarget - sentBefore;
    process.stderr.write(`resumable upload: a ${size}-byte file cut at 4 MB; the next round sent ${resent} bytes\n`);
    // What was left (and the requests around it), not the whole file again.
    expect(resent).toBeLessThan(size - 3_000_000);
    const sop = (await queryFolder<{ sop_instance_uid: string; file_sha256: string }>(w1!.data, 'SELECT sop_instance_uid, file_sha256 FROM instances ORDER BY id DESC LIMIT 1'))[0]!;
    expect((await queryFolder<{ file_sha256: string }>(hubData, 'SELECT file_sha256 FROM instances WHERE sop_instance_uid = ?', [sop.sop_instance_uid], place.databaseUrl))[0]?.file_sha256).toBe(sop.file_sha256);
  }, 240_000);

  it('quarantines for an admin an instance whose Patient ID the hub holds with another name, merging nothing', async () => {
    const [w1] = ws;
    const source = readdirSync(join(work, 'series'), { recursive: true, withFileTypes: true }).find((e) => e.isFile() && e.name.endsWith('.dcm'))!;
    const file = join(work, 'other-person.dcm');
    copyFileSync(join(source.parentPath, source.name), file);
    const uid = (): string => `2.25.${BigInt('0x' + randomBytes(15).toString('hex')).toString()}`;
    const sop = uid();
    const edited = spawnSync('dcmodify', ['-nb', '-m', '(0010,0010)=Other^Person', '-m', `(0008,0018)=${sop}`, '-m', `(0020,000E)=${uid()}`, file], { encoding: 'utf8' });
    expect(edited.status, edited.stderr).toBe(0);
    expect((await mia(['import', file, '--data', w1!.data])).status).toBe(0);
    const patientsBefore = await hubCount('SELECT COUNT(*) AS n FROM patients');

    const synced = await mia(['sync', 'now', '--data', w1!.data]);
    expect(synced.status).toBe(1);
    expect(synced.stdout).toMatch(/refused 1;/);
    const quarantined = await request(hub.url, adminKey, 'GET', '/v1/sync/quarantine');
    const item = quarantined.json.data.items.find((q: { key: string }) => q.key === sop);
    expect(item.reason).toMatch(/^Patient ID .* is held here with another name$/);
    expect(item.entity).toBe('instance');
    expect(await hubCount(`SELECT COUNT(*) AS n FROM instances WHERE sop_instance_uid = '${sop}'`)).toBe(0);
    expect(await hubCount('SELECT COUNT(*) AS n FROM patients')).toBe(patientsBefore);
    const status = await mia(['sync', 'status', '--data', w1!.data]);
    // Refused for good: this instance, and dr.b's verdict made after being disabled.
    expect(status.stdout).toMatch(/online\s+0\s+2/);

    // An admin looks: the file is the same person after all (a typo) and is let in; dr.b's late
    // verdict is kept out. Both stay listed with the decision; the released one reaches the log.
    const released = await request(hub.url, adminKey, 'POST', `/v1/sync/quarantine/${item.id}/release`);
    expect(released.status, released.text).toBe(200);
    expect(released.json.data).toMatchObject({ resolution: 'released', resolved_at: expect.any(String) });
    expect(await hubCount(`SELECT COUNT(*) AS n FROM instances WHERE sop_instance_uid = '${sop}'`)).toBe(1);
    expect(await hubCount(`SELECT COUNT(*) AS n FROM sync_changes WHERE entity_key = '${sop}'`)).toBe(1);
    const late = quarantined.json.data.items.find((q: { entity: string }) => q.entity === 'review');
    expect((await request(hub.url, adminKey, 'POST', `/v1/sync/quarantine/${late.id}/discard`)).json.data.resolution).toBe('discarded');
    expect((await request(hub.url, adminKey, 'POST', `/v1/sync/quarantine/${late.id}/release`)).status).toBe(409);
    expect((await request(hub.url, adminKey, 'GET', '/v1/sync/quarantine')).json.data.items).toEqual([]);
    const decided = (await request(hub.url, adminKey, 'GET', '/v1/sync/quarantine?resolved=true')).json.data.items.map((q: { entity: string; resolution: string }) => [q.entity, q.resolution]);
    expect(decided).toEqual([['review', 'discarded'], ['instance', 'released']]);
  }, 120_000);
  it('loses nothing and duplicates nothing when the workstation is killed with SIGKILL after the hub committed its push', async () => {
    const [w1] = ws;
    await phantomDicom(work, 'killed', { seed: 20_013_800, series: 1, modality: 'CT', slices: 3, size: 64, kinds: 'none' });
    expect((await mia(['import', join(work, 'killed'), '--data', w1!.data])).status).toBe(0);
    const before = await hubCount('SELECT COUNT(*) AS n FROM instances');
    const changesBefore = await hubCount('SELECT COUNT(*) AS n FROM sync_changes');

    // The hub commits and answers; the answer is held on the way, and the workstation dies waiting.
    w1!.proxy.set({ holdAnswerTo: 'POST /v1/sync/push' });
    const round = miaProcess(['sync', 'now', '--data', w1!.data]);
    for (let waited = 0; (await hubCount('SELECT COUNT(*) AS n FROM instances')) < before + 3; waited += 100) {
      expect(waited, 'the hub never committed the push').toBeLessThan(60_000);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    round.child.kill('SIGKILL');
    expect(await round.exited).toBe('SIGKILL');
    w1!.proxy.set({});
    const pending = await queryFolder<{ n: number }>(w1!.data, 'SELECT COUNT(*) AS n FROM sync_changes WHERE push_state IS NULL AND entity = ?', ['instance']);
    expect(Number(pending[0]?.n)).toBeGreaterThanOrEqual(3);

    const again = await mia(['sync', 'now', '--data', w1!.data]);
    expect(again.stdout).toMatch(/pushed [3-9] change\(s\) and 0 file\(s\)/);
    expect(await hubCount('SELECT COUNT(*) AS n FROM instances')).toBe(before + 3);
    expect(await hubCount('SELECT COUNT(*) AS n FROM sync_changes')).toBe(changesBefore + 3);
  }, 120_000);
});

describe('the hub\'s refusals', () => {
  const headers = (extra: Record<string, string> = {}): Record<string, string> => ({ 'mia-sync-protocol': '1', ...extra });

  it('answers another protocol version with 426 naming the one it speaks', async () => {
    const reply = await request(hub.url, ws[0]!.key, 'GET', '/v1/sync/pull', { headers: { 'mia-sync-protocol': '2' } });
    expect(reply.status).toBe(426);
    expect(reply.json.error.details).toMatch(/speaks sync protocol 1/);
  });

  it('refuses a change stamped over a day ahead, alone, and takes its batch-mates', async () => {
    const now = Date.now();
    const change = (wall: number, n: number) => ({
      change_id: `0190a0a0-0000-7000-8000-${String(n).padStart(12, '0')}`,
      entity: 'analysis',
      key: `ana_${'0'.repeat(23)}${n}`,
      op: 'put',
      hlc: `${String(wall).padStart(15, '0')}-0000-test`,
      user_id: null,
      payload: { scan_id: '9.9.9' },
    });
    const reply = await request(hub.url, ws[0]!.key, 'POST', '/v1/sync/push', {
      headers: headers({ 'idempotency-key': 'future-batch-1' }),
      body: { changes: [change(now + 2 * 86_400_000, 1), change(now + 10 * 60_000, 2)] },
    });
    expect(reply.status).toBe(200);
    const [far, near] = reply.json.data.results;
    // Refused for now: the device keeps it and sends it again (once its clock is right).
    expect(far).toMatchObject({ status: 'rejected', retry: true });
    expect(far.reason).toMatch(/h ahead of this clock \(at most 24 h\)/);
    // The near one is judged on its content (here, an incomplete analysis), with a clock warning.
    expect(near.status).toBe('rejected');
    expect(near.reason).toMatch(/^analysis payload/);
    expect(reply.json.data.warning).toMatch(/min ahead of this clock/);

    // An answer that asks for a change later is not kept: the batch sent again is judged again.
    const again = await request(hub.url, ws[0]!.key, 'POST', '/v1/sync/push', { headers: headers({ 'idempotency-key': 'future-batch-1' }), body: { changes: [change(now + 2 * 86_400_000, 1), change(now + 10 * 60_000, 2), change(now, 4)] } });
    expect(again.status).toBe(200);
    // A final answer is kept: the same key with the same body gets it, with another body 409.
    const settled = { changes: [change(now + 10 * 60_000, 2)] };
    const first = await request(hub.url, ws[0]!.key, 'POST', '/v1/sync/push', { headers: headers({ 'idempotency-key': 'settled-batch-1' }), body: settled });
    const same = await request(hub.url, ws[0]!.key, 'POST', '/v1/sync/push', { headers: headers({ 'idempotency-key': 'settled-batch-1' }), body: settled });
    expect(same.json.data).toEqual(first.json.data);
    const other = await request(hub.url, ws[0]!.key, 'POST', '/v1/sync/push', { headers: headers({ 'idempotency-key': 'settled-batch-1' }), body: { changes: [change(now, 3)] } });
    expect(other.status).toBe(409);
  });

  it('sets aside a change it refuses for what it holds, with its reason, and still takes the changes behind it', async () => {
    // A report edit kept with a NUL character in its text, as a workstation could before mia
    // refused them (eeb31a7), then an ordinary change: the hub refuses any request carrying a
    // NUL, so the first would hold back every later change of this workstation for good.
    const [w] = ws;
    type Row = { entity: string; entity_key: string; op: string; hlc: string; user_id: string | null; payload: string; device_id: string };
    const folder = await openDataFolder(w!.data);
    const ids = { nul: uuid7(Date.now()), plain: uuid7(Date.now() + 1) };
    try {
      const source = await folder.db.get<Row>("SELECT * FROM sync_changes WHERE entity = 'report' AND push_state = 'accepted' ORDER BY seq DESC LIMIT 1");
      expect(source).toBeDefined();
      const payload = JSON.parse(source!.payload) as { fields: { impression?: unknown } };
      const withNul = JSON.stringify({ ...payload, fields: { ...payload.fields, impression: 'dictated before\u0000the fix' } });
      // Stamped after this workstation's newest change, as its own clock would have.
      const newest = (await folder.db.get<{ hlc: string }>('SELECT MAX(hlc) AS hlc FROM sync_changes WHERE device_id = ?', [source!.device_id]))!.hlc;
      const [wall, , ...node] = newest.split('-');
      const stamp = (ms: number): string => `${String(Number(wall) + ms).padStart(15, '0')}-0000-${node.join('-')}`;
      const insert = 'INSERT INTO sync_changes (change_id, device_id, entity, entity_key, op, hlc, user_id, payload, committed_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)';
      for (const [id, body, ms] of [[ids.nul, withNul, 1], [ids.plain, source!.payload, 2]] as const) {
        await folder.db.run(insert, [id, source!.device_id, source!.entity, source!.entity_key, source!.op, stamp(ms), source!.user_id, body, new Date().toISOString()]);
      }
    } finally {
      await folder.close();
    }
    const run = await mia(['sync', 'now', '--data', w!.data]);
    // Exit 1 says a change was refused; the round itself went through.
    expect(run.status, run.stderr).toBe(1);
    expect(run.stdout).toMatch(/pushed 1 change\(s\) .*; refused 1; waiting 0/);
    const states = await queryFolder<{ change_id: string; push_state: string; push_error: string | null }>(w!.data, 'SELECT change_id, push_state, push_error FROM sync_changes WHERE change_id IN (?, ?)', [ids.nul, ids.plain]);
    const byId = new Map(states.map((r) => [r.change_id, r]));
    expect(byId.get(ids.nul)).toMatchObject({ push_state: 'rejected' });
    expect(byId.get(ids.nul)?.push_error).toMatch(/400 .*changes\.0\.payload\.fields\.impression: contains a NUL character/);
    expect(byId.get(ids.plain)).toMatchObject({ push_state: 'accepted', push_error: null });
    expect(await hubCount(`SELECT COUNT(*) AS n FROM sync_changes WHERE change_id = '${ids.plain}'`)).toBe(1);
    expect(await hubCount(`SELECT COUNT(*) AS n FROM sync_changes WHERE change_id = '${ids.nul}'`)).toBe(0);
    // Set aside, not sent again.
    const again = await mia(['sync', 'now', '--data', w!.data]);
    expect(again.stdout).toMatch(/pushed 0 change\(s\) .*; refused 0;/);
  }, 120_000);

  it('sets aside an instance whose archived file was damaged on the workstation, and sends its series-mate', async () => {
    const [w] = ws;
    await phantomDicom(work, 'damaged', { seed: 20_014_000, series: 1, modality: 'CT', slices: 2, size: 64, kinds: 'none' });
    expect((await mia(['import', join(work, 'damaged'), '--data', w!.data])).status).toBe(0);
    const pending = await queryFolder<{ change_id: string; entity_key: string; payload: string }>(w!.data, "SELECT change_id, entity_key, payload FROM sync_changes WHERE entity = 'instance' AND push_state IS NULL AND device_id = (SELECT value FROM settings WHERE key = 'sync.device_id') ORDER BY seq");
    expect(pending).toHaveLength(2);
    const [bad, good] = pending.map((r) => ({ ...r, sha: (JSON.parse(r.payload) as { sha256: string }).sha256 }));
    // One byte flipped inside the stored file, as a failing disk would.
    const file = blobPath(w!.data, bad!.sha);
    const original = readFileSync(file);
    const bytes = Buffer.from(original);
    const at = bytes.length >> 1;
    bytes[at] = (bytes[at] ?? 0) ^ 0xff;
    chmodSync(file, 0o600);
    writeFileSync(file, bytes);

    const run = await mia(['sync', 'now', '--data', w!.data]);
    expect(run.status, run.stderr).toBe(1);
    expect(run.stdout).toMatch(/; refused 1;/);
    const states = new Map((await queryFolder<{ change_id: string; push_state: string; push_error: string | null }>(w!.data, 'SELECT change_id, push_state, push_error FROM sync_changes WHERE change_id IN (?, ?)', [bad!.change_id, good!.change_id])).map((r) => [r.change_id, r]));
    expect(states.get(bad!.change_id)?.push_state).toBe('rejected');
    expect(states.get(bad!.change_id)?.push_error).toMatch(new RegExp(`damaged: it hashes to [0-9a-f]{64}, not ${bad!.sha}`));
    expect(states.get(good!.change_id)).toMatchObject({ push_state: 'accepted', push_error: null });
    const onHub = async (uid: string): Promise<number> => Number((await queryFolder<{ n: number }>(hubData, 'SELECT COUNT(*) AS n FROM instances WHERE sop_instance_uid = ?', [uid], place.databaseUrl))[0]?.n);
    expect(await onHub(good!.entity_key)).toBe(1);
    expect(await onHub(bad!.entity_key)).toBe(0);
    expect(existsSync(blobPath(hubData, bad!.sha))).toBe(false);

    // The admin sees which change and why, restores the file from a backup, and sends it again.
    const listed = await mia(['sync', 'refused', '--data', w!.data]);
    expect(listed.status, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`${bad!.change_id}\\s+instance\\s+${bad!.entity_key.replace(/\./g, '\\.')}.*damaged: it hashes to`));
    writeFileSync(file, original);
    const unknown = await mia(['sync', 'send-again', uuid7(Date.now()), '--data', w!.data]);
    expect(unknown.status).not.toBe(0);
    expect(unknown.stderr).toMatch(/sync send-again: Refused change not found/);
    const again = await mia(['sync', 'send-again', bad!.change_id, '--data', w!.data]);
    expect(again.stdout).toMatch(/^1 refused change\(s\) will be sent again/m);
    const resent = await mia(['sync', 'now', '--data', w!.data]);
    expect(resent.status, resent.stderr + resent.stdout).toBe(0);
    expect(resent.stdout).toMatch(/; refused 0;/);
    expect(await onHub(bad!.entity_key)).toBe(1);
    expect(existsSync(blobPath(hubData, bad!.sha))).toBe(true);
    const audited = await queryFolder<{ target: string }>(w!.data, "SELECT target FROM audit_events WHERE action = 'sync.refused_send_again'");
    expect(audited.map((a) => a.target)).toEqual([`change:${bad!.change_id}`]);
  }, 120_000);

  it('refuses a person\'s key, and a revoked device at once', async () => {
    const admin = await request(hub.url, adminKey, 'GET', '/v1/sync/pull', { headers: headers() });
    expect(admin.status).toBe(403);
    const devices = await request(hub.url, adminKey, 'GET', '/v1/devices');
    const second = devices.json.data.items.find((d: { name: string }) => d.name === 'reading room 2');
    expect(second.status).toBe('active');
    expect(second.last_seen_at).not.toBeNull();
    const revoked = await request(hub.url, adminKey, 'DELETE', `/v1/devices/${second.id}`);
    expect(revoked.json.data.status).toBe('revoked');
    const refused = await mia(['sync', 'now', '--data', ws[1]!.data]);
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/401 .*device was revoked/);
  });
});

describe('workstation clocks that are wrong', () => {
  it('warns of a clock 10 minutes ahead and takes the work; the hub shows the offset', async () => {
    const [w1] = ws;
    await phantomDicom(work, 'ahead', { seed: 20_013_500, series: 1, modality: 'CT', slices: 2, size: 64, kinds: 'none' });
    expect((await mia(['import', join(work, 'ahead'), '--data', w1!.data], { clockOffset: '+10m' })).status).toBe(0);
    const synced = await mia(['sync', 'now', '--data', w1!.data], { clockOffset: '+10m' });
    expect(synced.status, synced.stderr).toBe(0);
    expect(synced.stdout).toMatch(/pushed 2 change\(s\) and 2 file\(s\)/);
    expect(synced.stderr).toMatch(/warning: device .* is 10 min ahead of this clock: check its time/);
    const devices = await request(hub.url, adminKey, 'GET', '/v1/devices');
    const offset = devices.json.data.items.find((d: { name: string }) => d.name === 'reading room 1').clock_offset_ms as number;
    expect(offset).toBeGreaterThan(9 * 60_000);
    expect(offset).toBeLessThan(11 * 60_000);
  }, 120_000);

  it('keeps the work of a clock two days ahead, waiting with the reason, and never fails the local write', async () => {
    const [w1] = ws;
    await phantomDicom(work, 'future', { seed: 20_013_600, series: 1, modality: 'CT', slices: 2, size: 64, kinds: 'none' });
    const before = await hubCount('SELECT COUNT(*) AS n FROM instances');
    expect((await mia(['import', join(work, 'future'), '--data', w1!.data], { clockOffset: '+2d' })).status).toBe(0);
    const synced = await mia(['sync', 'now', '--data', w1!.data], { clockOffset: '+2d' });
    expect(synced.status, synced.stderr).toBe(0);
    expect(synced.stdout).toMatch(/pushed 0 change\(s\).*refused 0; waiting 2/);
    expect(await hubCount('SELECT COUNT(*) AS n FROM instances')).toBe(before);
    const status = await mia(['sync', 'status', '--data', w1!.data]);
    expect(status.stdout).toMatch(/online\s+2\s+\d+/);
    expect(status.stdout).toMatch(/waiting: timestamp .* is 4[78] h ahead of this clock \(at most 24 h\)/);
  }, 120_000);

  it('keeps timestamps rising on a workstation whose clock jumps back', async () => {
    const [w1] = ws;
    await phantomDicom(work, 'behind', { seed: 20_013_700, series: 1, modality: 'CT', slices: 2, size: 64, kinds: 'none' });
    expect((await mia(['import', join(work, 'behind'), '--data', w1!.data], { clockOffset: '-1d' })).status).toBe(0);
    const own = await queryFolder<{ hlc: string }>(w1!.data, `SELECT hlc FROM sync_changes WHERE device_id = (SELECT value FROM settings WHERE key = 'sync.device_id') ORDER BY seq`);
    const stamps = own.map((r) => r.hlc);
    expect(stamps.length).toBeGreaterThan(4);
    // In commit order, every timestamp is above the one before, the day-behind ones included.
    for (let i = 1; i < stamps.length; i++) expect(stamps[i]! > stamps[i - 1]!, `${stamps[i - 1]} then ${stamps[i]}`).toBe(true);
  }, 120_000);
});
