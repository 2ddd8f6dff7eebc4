/**
 * Audit events are written a turn's batch at a time (server/audit/audit-writer.ts). A real
 * `mia serve` answers a burst of audited reads, then is stopped or killed: every answered read
 * is in the trail. SIGTERM flushes before the database closes; kill -9 after one more round
 * trip finds each event committed, as it did when each was inserted on its own.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openReadOnly } from './checks.ts';
import { call, createKey, startServe, type ServeProcess } from './serve-process.ts';

const work = mkdtempSync(join(tmpdir(), 'mia-audit-kill-'));
const started: ServeProcess[] = [];
const BURST = 200;

afterAll(() => {
  for (const server of started) if (server.alive()) server.child.kill('SIGKILL');
  rmSync(work, { recursive: true, force: true });
});

/** Answers `BURST` audited reads at once (many share a turn, so a batch) and returns their request ids. */
async function burst(server: ServeProcess, key: string): Promise<string[]> {
  const replies = await Promise.all(
    Array.from({ length: BURST }, (_, i) => call(server.url, key, 'GET', i % 2 === 0 ? '/v1/scan/results' : '/v1/scans')),
  );
  for (const reply of replies) expect(reply.status, reply.text).toBe(200);
  return replies.map((reply) => String(reply.json.meta.request_id));
}

function auditedRequestIds(dataDir: string): Set<string> {
  const db = openReadOnly(dataDir);
  try {
    const rows = db.prepare("SELECT request_id FROM audit_events WHERE action IN ('results.list', 'scans.list')").all() as { request_id: string }[];
    return new Set(rows.map((row) => row.request_id));
  } finally {
    db.close();
  }
}

async function serving(name: string): Promise<{ server: ServeProcess; key: string; dataDir: string }> {
  const dataDir = join(work, name);
  const key = createKey(dataDir, `${name}@hospital.test`);
  const server = await startServe(dataDir);
  started.push(server);
  return { server, key, dataDir };
}

describe('audit events of answered requests survive the end of the process', () => {
  it('SIGTERM right after the last answer: every answered read is in the trail', async () => {
    const { server, key, dataDir } = await serving('term');
    const ids = await burst(server, key);
    await server.stop();
    const trail = auditedRequestIds(dataDir);
    expect(ids.filter((id) => !trail.has(id))).toEqual([]);
  });

  it('kill -9 after one more round trip: every answered read is in the trail', async () => {
    const { server, key, dataDir } = await serving('kill');
    const ids = await burst(server, key);
    // The server reads this request in a later turn than it wrote the burst's answers, so the
    // turn's batch has been committed, as each single insert had been before it.
    expect((await call(server.url, key, 'GET', '/v1/labels')).status).toBe(200);
    server.child.kill('SIGKILL');
    await server.exited;
    const trail = auditedRequestIds(dataDir);
    expect(ids.filter((id) => !trail.has(id))).toEqual([]);
  });
});
