/**
 * The device key on the desktop (issue 13): sealed with the OS keychain, never in the clear in the
 * data folder. Electron's safeStorage is the edge here (there is no keychain in CI): a stand-in
 * that really encrypts, with a key only this process holds, as the OS keychain does.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SafeStorage } from 'electron';
import { afterAll, describe, expect, it } from 'vitest';
import { keychainBox } from '../../../main/keychain.ts';
import { startEmbeddedServer } from '../../../main/embedded-server.ts';
import { enrollDevice } from '#server/sync/devices.ts';
import { HUB_LINK_FILE, openHubLink, writeHubLink } from '#server/sync/hub-link.ts';
import { startTestServer } from '../../helpers/server.ts';

function standInSafeStorage(backend: ReturnType<SafeStorage['getSelectedStorageBackend']> = 'gnome_libsecret', available = true): SafeStorage {
  const secret = randomBytes(32);
  return {
    isEncryptionAvailable: () => available,
    getSelectedStorageBackend: () => backend,
    encryptString(plain: string): Buffer {
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', secret, iv);
      const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      return Buffer.concat([iv, cipher.getAuthTag(), body]);
    },
    decryptString(sealed: Buffer): string {
      const decipher = createDecipheriv('aes-256-gcm', secret, sealed.subarray(0, 12));
      decipher.setAuthTag(sealed.subarray(12, 28));
      return Buffer.concat([decipher.update(sealed.subarray(28)), decipher.final()]).toString('utf8');
    },
  } as unknown as SafeStorage;
}

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('the device key in the OS keychain', () => {
  it('is sealed only where a real keychain is: not when unavailable, not with Linux\'s basic_text fallback', () => {
    expect(keychainBox(standInSafeStorage('gnome_libsecret', false), 'linux')).toBeNull();
    expect(keychainBox(standInSafeStorage('basic_text'), 'linux')).toBeNull();
    expect(keychainBox(standInSafeStorage('gnome_libsecret'), 'linux')).not.toBeNull();
    expect(keychainBox(standInSafeStorage('unknown'), 'darwin')).not.toBeNull();
  });

  it('seals a key that mia sync join wrote in the clear when the app starts, and syncs with it; without the keychain it cannot be read', async () => {
    const hub = await startTestServer({ hubMode: true });
    const dataDir = mkdtempSync(join(tmpdir(), 'mia-keychain-'));
    dirs.push(dataDir);
    try {
      const enrolled = await enrollDevice(hub.server.services, 'desktop 1', 'test');
      writeHubLink(dataDir, { url: hub.url, key: enrolled.key, device_id: enrolled.device.id, device_name: enrolled.device.name });
      expect(readFileSync(join(dataDir, HUB_LINK_FILE), 'utf8')).toContain(enrolled.key);

      const app = await startEmbeddedServer({ dataDir, uiDir: null, secretBox: keychainBox(standInSafeStorage(), 'linux') });
      try {
        const file = readFileSync(join(dataDir, HUB_LINK_FILE), 'utf8');
        expect(file).not.toContain(enrolled.key);
        expect(file).not.toContain(enrolled.key.slice(-20));
        expect(JSON.parse(file)).toMatchObject({ url: hub.url, device_id: enrolled.device.id, key_sealed: expect.any(String) });
        // The app opens it: a round reaches the hub.
        const run = await fetch(`${app.url}/v1/sync/run`, { method: 'POST', headers: { authorization: `Bearer ${app.apiKey}` } });
        const status = ((await run.json()) as { data: { state: string; last_error: string | null } }).data;
        expect(status).toMatchObject({ state: 'online', last_error: null });
      } finally {
        await app.stop();
      }
      // The CLI (no keychain) says why it cannot sync, rather than failing against the hub.
      const opened = openHubLink(dataDir);
      expect(opened.link).toBeNull();
      expect('reason' in opened ? opened.reason : '').toMatch(/sealed with the desktop app's keychain/);
    } finally {
      await hub.close();
    }
  }, 60_000);
});
