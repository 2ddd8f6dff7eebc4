/**
 * The OS keychain as the server's SecretBox (server/sync/hub-link.ts): the workstation's device
 * key is kept sealed by Electron's safeStorage (Keychain on macOS, DPAPI on Windows, the Secret
 * Service or KWallet on Linux), so the link file alone is useless to anyone who copies it.
 *
 * Where safeStorage has no real keychain (Linux without a Secret Service falls back to
 * 'basic_text', a fixed key in Chromium's source), sealing would only look like protection: the
 * key then stays in the 0600 file, as headless.
 */
import type { SafeStorage } from 'electron';
import type { SecretBox } from '#server/sync/hub-link.ts';

export function keychainBox(safeStorage: SafeStorage, platform: NodeJS.Platform = process.platform): SecretBox | null {
  if (!safeStorage.isEncryptionAvailable()) return null;
  if (platform === 'linux' && ['basic_text', 'unknown'].includes(safeStorage.getSelectedStorageBackend())) return null;
  return {
    seal: (plain) => safeStorage.encryptString(plain).toString('base64'),
    open: (sealed) => safeStorage.decryptString(Buffer.from(sealed, 'base64')),
  };
}
