import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCAL_ADMIN_EMAIL, startEmbeddedServer } from '../../../main/embedded-server.ts';
import { authenticate } from '#server/auth/authenticate.ts';
import { systemClock } from '#server/clock.ts';
import { dicomEcho } from '#server/dimse/scu.ts';
import { openDatabase } from '#server/store/sqlite.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'mia-desktop-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
}

/** Whether `key` still authenticates, read through a connection of the test's own. */
async function keyWorks(dir: string, key: string): Promise<boolean> {
  const db = openDatabase(dir);
  try {
    return (await authenticate(db, systemClock, `Bearer ${key}`)).ok;
  } finally {
    await db.close();
  }
}

describe('embedded server for the desktop app', () => {
  it('first launch: loopback on a free port, a local admin, a working launch key; quit revokes it', async () => {
    const first = await startEmbeddedServer({ dataDir, uiDir: null });
    expect(first.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    expect(first.firstLaunch).toBe(true);
    const me = await fetch(`${first.url}/v1/auth/me`, { headers: { Authorization: `Bearer ${first.apiKey}` } });
    expect(me.status).toBe(200);
    expect(((await me.json()) as any).data.user).toMatchObject({ email: LOCAL_ADMIN_EMAIL, role: 'admin' });
    const key = first.apiKey;
    await first.stop();

    // The key was never written in clear to the data folder.
    for (const file of filesUnder(dataDir)) expect(readFileSync(file).includes(key)).toBe(false);

    const second = await startEmbeddedServer({ dataDir, uiDir: null });
    expect(second.firstLaunch).toBe(false);
    expect(second.apiKey).not.toBe(key);
    const old = await fetch(`${second.url}/v1/auth/me`, { headers: { Authorization: `Bearer ${key}` } });
    expect(old.status).toBe(401);
    const keys = await fetch(`${second.url}/v1/auth/keys`, { headers: { Authorization: `Bearer ${second.apiKey}` } });
    const items = ((await keys.json()) as any).data.items as any[];
    expect(items.find((k) => k.id !== second.keyId)?.status).toBe('revoked');
    await second.stop();
    await second.stop(); // idempotent: before-quit may fire twice
  });

  it('quit order: analyses stop, then the server closes while the key still works, then the key is revoked', async () => {
    const embedded = await startEmbeddedServer({ dataDir, uiDir: null });
    const key = embedded.apiKey;
    const steps: string[] = [];
    const queue = embedded.server.runtime.analyses;
    const stopQueue = queue.stop.bind(queue);
    let queueStops = 0;
    queue.stop = async () => {
      // server.close() stops the queue once more (a no-op by then); the first call is the one.
      if (queueStops++ === 0) steps.push(`queue stops (key works: ${await keyWorks(dataDir, key)})`);
      await stopQueue();
    };
    const close = embedded.server.close.bind(embedded.server);
    embedded.server.close = async () => {
      // A request the window made just before it closed still gets its answer, not a 401.
      const late = await fetch(`${embedded.url}/v1/auth/me`, { headers: { Authorization: `Bearer ${key}` } });
      steps.push(`server closes (last request ${late.status})`);
      await close();
      steps.push(`server closed (key works: ${await keyWorks(dataDir, key)})`);
    };
    await embedded.stop();
    steps.push(`stopped (key works: ${await keyWorks(dataDir, key)})`);
    expect(steps).toEqual([
      'queue stops (key works: true)',
      'server closes (last request 200)',
      'server closed (key works: true)',
      'stopped (key works: false)',
    ]);
  });

  it('a launch key revoked on the Admin screen is replaced when the window asks for a session', async () => {
    const embedded = await startEmbeddedServer({ dataDir, uiDir: null });
    try {
      const first = await embedded.session();
      expect(first).toEqual({ baseUrl: embedded.url, apiKey: embedded.apiKey });
      // Still working: the same key again.
      expect((await embedded.session()).apiKey).toBe(first.apiKey);
      const revoked = await fetch(`${embedded.url}/v1/auth/keys/${embedded.keyId}`, { method: 'DELETE', headers: { Authorization: `Bearer ${first.apiKey}` } });
      expect(revoked.status).toBe(200);
      expect((await fetch(`${embedded.url}/v1/auth/me`, { headers: { Authorization: `Bearer ${first.apiKey}` } })).status).toBe(401);

      const fresh = await embedded.session();
      expect(fresh.apiKey).not.toBe(first.apiKey);
      const me = await fetch(`${embedded.url}/v1/auth/me`, { headers: { Authorization: `Bearer ${fresh.apiKey}` } });
      expect(me.status).toBe(200);
      expect(((await me.json()) as any).data.user.email).toBe(LOCAL_ADMIN_EMAIL);
    } finally {
      await embedded.stop();
    }
    expect(await keyWorks(dataDir, embedded.apiKey)).toBe(false);
  });
  it('with a DICOM port, the desktop also answers C-ECHO as its AE title, and stops listening on quit', async () => {
    const embedded = await startEmbeddedServer({ dataDir, uiDir: null, dicom: { port: 0, host: '127.0.0.1', aeTitle: 'READINGROOM1', allow: [{ aeTitle: 'CTSCANNER', host: 'localhost' }] } });
    const listener = embedded.server.runtime.dicomListener();
    expect(listener?.aeTitle).toBe('READINGROOM1');
    const peer = { host: '127.0.0.1', port: listener?.port ?? 0, calledAeTitle: 'READINGROOM1', callingAeTitle: 'CTSCANNER' };
    await dicomEcho(peer);
    await expect(dicomEcho({ ...peer, callingAeTitle: 'STRANGER' })).rejects.toThrow();
    await embedded.stop();
    await expect(dicomEcho(peer)).rejects.toThrow();
  });
});
