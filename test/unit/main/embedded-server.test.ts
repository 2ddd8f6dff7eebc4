import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LOCAL_ADMIN_EMAIL, startEmbeddedServer } from '../../../main/embedded-server.ts';

const dataDir = mkdtempSync(join(tmpdir(), 'mia-desktop-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function filesUnder(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [path];
  });
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
});
