/**
 * A hospital hub of three `mia serve --hub` processes on one PostgreSQL and one shared data folder,
 * a client spread over them (issue 12). Each node plays a host of its own (MIA_NODE_HOST), so a
 * node killed with SIGKILL is found dead by its lease, as on real separate machines, not by a pid
 * probe. Uploads land on any node; one node is killed while analysing; every analysis still
 * completes exactly once, nothing acknowledged is lost, and rate limits, failed-authentication
 * throttling and key revocation hold across the nodes.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { phantomDicom } from '../analysis/analysis-helpers.ts';
import { freshPostgresDatabase } from '../helpers/postgres-cluster.ts';

const BIN = join(import.meta.dirname, '../../bin/mia.js');
const RATE_LIMIT = 3000;
const SERIES = 6;

type Node = { name: string; url: string; child: ChildProcess; exited: Promise<unknown>; output: () => string };
type Reply = { status: number; json: any; text: string };

let databaseUrl: string;
let dataDir: string;
let work: string;
let adminKey: string;
let nodes: Node[] = [];
let sql: pg.Client;

function cli(args: string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [BIN, ...args, '--data', dataDir, '--database', databaseUrl], { encoding: 'utf8', timeout: 60_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

async function startNode(name: string): Promise<Node> {
  const child = spawn(process.execPath, [BIN, 'serve', '--hub', '--port', '0', '--data', dataDir, '--database', databaseUrl, '--rate-limit', String(RATE_LIMIT)], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, MIA_NODE_HOST: name },
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', () => {
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (match?.[1]) resolve(match[1]);
    });
    void exited.then(() => reject(new Error(`node ${name} exited before listening:\n${output}`)));
  });
  return { name, url, child, exited, output: () => output };
}

async function call(node: Node, method: string, path: string, options: { key?: string; body?: Buffer | string; type?: string } = {}): Promise<Reply> {
  return await new Promise((resolve, reject) => {
    const headers: Record<string, string> = { Authorization: `Bearer ${options.key ?? adminKey}` };
    if (options.body !== undefined) headers['Content-Type'] = options.type ?? 'application/json';
    const req = httpRequest(node.url + path, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json: unknown;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode ?? 0, json, text });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    if (options.body !== undefined) req.write(options.body);
    req.end();
  });
}

const live = (): Node[] => nodes.filter((n) => n.child.exitCode === null && n.child.signalCode === null);

/** As a client behind a round robin does: a request that fails on its connection goes to the next node. */
async function anyNode(i: number, method: string, path: string, options: { key?: string; body?: Buffer | string; type?: string } = {}): Promise<Reply> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const up = live();
    const node = up[(i + attempt) % up.length];
    if (!node) break;
    try {
      return await call(node, method, path, options);
    } catch (err) {
      lastError = err;
    }
  }
  throw lastError instanceof Error ? lastError : new Error('no node answered');
}

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs: number): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

beforeAll(async () => {
  databaseUrl = await freshPostgresDatabase();
  work = mkdtempSync(join(tmpdir(), 'mia-hub-'));
  dataDir = join(work, 'shared-data');
  // The CLI works on the hub's database as on a workstation's folder.
  const created = cli(['keys', 'create', '--role', 'admin', '--email', 'admin@hub.test']);
  expect(created.status, created.stderr).toBe(0);
  adminKey = created.stdout.trimEnd().split('\n').at(-1) ?? '';
  nodes = await Promise.all(['hub-a', 'hub-b', 'hub-c'].map(startNode));
  sql = new pg.Client({ connectionString: databaseUrl });
  await sql.connect();
}, 120_000);

afterAll(async () => {
  await sql?.end();
  for (const node of nodes) node.child.kill('SIGTERM');
  await Promise.all(nodes.map((n) => n.exited));
  if (work) rmSync(work, { recursive: true, force: true });
}, 60_000);

describe('three hub nodes on one PostgreSQL', () => {
  let scanIds: string[] = [];
  let files: string[] = [];

  it('stores every upload acknowledged by any node, once', async () => {
    await phantomDicom(work, 'series', { seed: 20_009_700, series: SERIES, modality: 'CT', slices: 48, size: 192 });
    const root = join(work, 'series');
    files = readdirSync(root, { recursive: true, withFileTypes: true })
      .filter((entry) => entry.isFile() && entry.name.endsWith('.dcm'))
      .map((entry) => join(entry.parentPath, entry.name));
    expect(files.length).toBe(SERIES * 48);
    const acknowledged = await Promise.all(
      files.map(async (file, i) => (await anyNode(i, 'POST', '/v1/instances', { body: readFileSync(file), type: 'application/dicom' })).status),
    );
    expect(acknowledged.every((status) => status === 200 || status === 201), JSON.stringify(acknowledged.filter((s) => s >= 300))).toBe(true);
    const scans = (await anyNode(0, 'GET', '/v1/scans?limit=100')).json.data.items as { scan_id: string; instance_count: number }[];
    expect(scans).toHaveLength(SERIES);
    expect(scans.every((s) => s.instance_count === 48)).toBe(true);
    scanIds = scans.map((s) => s.scan_id);
    const stored = await sql.query<{ n: string }>('SELECT count(*) AS n FROM instances');
    expect(Number(stored.rows[0]?.n)).toBe(files.length);
  }, 240_000);

  it('runs each analysis exactly once, though the node running one is killed with SIGKILL', async () => {
    const jobs = await Promise.all(scanIds.map(async (scanId, i) => (await anyNode(i, 'POST', `/v1/scans/${scanId}/analyses`, { body: '{}' })).json.data.id as string));
    expect(jobs).toHaveLength(SERIES);

    // A follower on a node that does not run the job hears it move (LISTEN/NOTIFY, and the row).
    const running = await waitFor(
      'a running analysis',
      async () => {
        const r = await sql.query<{ public_id: string; host: string }>(
          `SELECT a.public_id, n.host FROM analyses a JOIN nodes n ON n.id = a.owner_node WHERE a.status = 'running' AND a.slices_done > 0 ORDER BY a.id LIMIT 1`,
        );
        return r.rows[0];
      },
      120_000,
    );
    const victim = nodes.find((n) => n.name === running.host);
    expect(victim).toBeDefined();
    victim?.child.kill('SIGKILL');
    await victim?.exited;
    expect(live()).toHaveLength(2);

    // The survivors take the job over once its node's lease has run out, and finish every job.
    const finished = await waitFor(
      'every analysis to finish',
      async () => {
        const r = await sql.query<{ public_id: string; status: string; interruptions: string }>('SELECT public_id, status, interruptions FROM analyses ORDER BY id');
        return r.rows.every((row) => ['succeeded', 'failed', 'not_applicable', 'cancelled'].includes(row.status)) ? r.rows : undefined;
      },
      240_000,
    );
    expect(finished.map((r) => r.status)).toEqual(Array(SERIES).fill('succeeded'));
    expect(Number(finished.find((r) => r.public_id === running.public_id)?.interruptions)).toBe(1);

    // One analysis per scan, each scan's result set written once.
    const perScan = await sql.query<{ n: string }>(`SELECT count(*) AS n FROM analyses GROUP BY scan_ref`);
    expect(perScan.rows.map((r) => Number(r.n))).toEqual(Array(SERIES).fill(1));
    const duplicates = await sql.query(
      `SELECT analysis_ref FROM findings GROUP BY analysis_ref, label, instance_uid, frame, x, y, width, height HAVING count(*) > 1`,
    );
    expect(duplicates.rows).toEqual([]);
    const results = await anyNode(1, 'GET', '/v1/scan/results?limit=100');
    expect(results.json.data.items).toHaveLength(SERIES);
  }, 400_000);

  it('keeps following a job from another node through the live ones', async () => {
    const scanId = scanIds[0] ?? '';
    const job = await anyNode(0, 'POST', `/v1/scans/${scanId}/analyses`, { body: '{}' });
    expect(job.status).toBe(202);
    // Whichever node runs it, a follower on every live node gets to its end.
    const ends = await Promise.all(
      live().map(async (node) => {
        const events = await call(node, 'GET', `/v1/analyses/${job.json.data.id as string}/events`);
        return events.text.split('\n').filter((line) => line.startsWith('event: ')).map((line) => line.slice(7));
      }),
    );
    for (const events of ends) expect(events.at(-1)).toBe('done');
  }, 120_000);

  it('refuses a key on every node as soon as one node revoked it', async () => {
    const [a, b] = live();
    if (!a || !b) throw new Error('two live nodes expected');
    const issued = (await call(a, 'POST', '/v1/auth/keys', { body: JSON.stringify({ name: 'revoke-me' }) })).json.data as { key: string; api_key: { id: string } };
    expect((await call(b, 'GET', '/v1/auth/me', { key: issued.key })).status).toBe(200);
    expect((await call(b, 'DELETE', `/v1/auth/keys/${issued.api_key.id}`)).status).toBe(200);
    for (const node of live()) expect((await call(node, 'GET', '/v1/auth/me', { key: issued.key })).status).toBe(401);
    // And the CLI reads the same hub.
    const keys = cli(['keys', 'list']);
    expect(keys.status, keys.stderr).toBe(0);
    expect(keys.stdout).toContain(issued.api_key.id);
    const users = cli(['users', 'list']);
    expect(users.stdout).toContain('admin@hub.test');
  }, 60_000);

  it("counts a key's requests on every node against one limit", async () => {
    const key = (await anyNode(0, 'POST', '/v1/auth/keys', { body: JSON.stringify({ name: 'burst' }) })).json.data.key as string;
    // Not across a window boundary: a fixed window would reset mid-burst.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 500));
    const statuses: number[] = [];
    const total = RATE_LIMIT + 600;
    for (let sent = 0; sent < total; sent += 60) {
      const batch = await Promise.all(Array.from({ length: Math.min(60, total - sent) }, (_, i) => anyNode(sent + i, 'GET', '/v1/auth/me', { key })));
      statuses.push(...batch.map((r) => r.status));
    }
    const ok = statuses.filter((s) => s === 200).length;
    // Per node, each of the two live ones would have allowed RATE_LIMIT on its own.
    expect(ok).toBe(RATE_LIMIT);
    expect(statuses.filter((s) => s === 429).length).toBe(total - RATE_LIMIT);
  }, 180_000);

  it('throttles failed authentications of an address across nodes', async () => {
    const bad = `mia_${'B'.repeat(49)}`;
    const statuses = await Promise.all(Array.from({ length: 90 }, (_, i) => anyNode(i, 'GET', '/v1/auth/me', { key: bad }).then((r) => r.status)));
    // 60 failures a window per address (the default); each node alone would have seen 45.
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(30);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
  }, 60_000);

});
