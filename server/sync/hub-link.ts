/**
 * Where a workstation keeps its hub: the hub's URL, its device id and the device key, in
 * <data>/sync/hub.json, readable by the account running mia only (0600). On the desktop the key
 * is sealed with the OS keychain (Electron's safeStorage, handed in by main/ as a SecretBox): the
 * file then holds only the sealed key, which is useless without this account's keychain, and a
 * key written there in the clear (by `mia sync join`) is sealed when the app starts.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync, openSync, fsyncSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { keyShapeProblem } from '#server/auth/key-format.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';

export const HUB_LINK_FILE = join('sync', 'hub.json');

const deviceKey = z.string().refine((k) => keyShapeProblem(k) === undefined, 'a device key');
const stored = z.object({
  url: z.string().url(),
  device_id: z.string().min(1).max(100),
  device_name: z.string().max(100),
  key: deviceKey.optional(),
  /** The key sealed by the OS keychain (base64), in place of `key`. */
  key_sealed: z.string().max(10_000).optional(),
});
const linkSchema = stored.extend({ key: deviceKey }).omit({ key_sealed: true });
export type HubLink = z.infer<typeof linkSchema>;

/** Seals and opens secrets with the OS keychain; the desktop app hands one in. */
export type SecretBox = { seal(plain: string): string; open(sealed: string): string };

function readStored(dataDir: string): z.infer<typeof stored> | null {
  let text: string;
  try {
    text = readFileSync(join(dataDir, HUB_LINK_FILE), 'utf8');
  } catch {
    return null;
  }
  try {
    const parsed = stored.safeParse(JSON.parse(text));
    return parsed.success && (parsed.data.key !== undefined || parsed.data.key_sealed !== undefined) ? parsed.data : null;
  } catch {
    // A damaged file links to nothing; mia sync join writes it again.
    return null;
  }
}

/** Whether this folder is linked to a hub, whether or not its key can be opened here. */
export function isLinked(dataDir: string): boolean {
  return readStored(dataDir) !== null;
}

/** The link without its key: what status screens show. */
export function readLinkInfo(dataDir: string): { url: string; device_id: string; device_name: string; sealed: boolean } | null {
  const s = readStored(dataDir);
  return s ? { url: s.url, device_id: s.device_id, device_name: s.device_name, sealed: s.key === undefined } : null;
}

/** The link, or why it cannot be used here (a key sealed by a keychain this process lacks). */
export function openHubLink(dataDir: string, box: SecretBox | null = null): { link: HubLink } | { link: null; reason: string } {
  const s = readStored(dataDir);
  if (!s) return { link: null, reason: 'not linked to a hub: run mia sync join HUB_URL first' };
  let key = s.key;
  if (key === undefined && s.key_sealed !== undefined) {
    if (!box) return { link: null, reason: 'the device key is sealed with the desktop app\'s keychain: sync from the app, or join again here with mia sync join' };
    try {
      key = box.open(s.key_sealed);
    } catch {
      return { link: null, reason: 'the device key could not be opened with this account\'s keychain: join again with mia sync join' };
    }
  }
  const parsed = linkSchema.safeParse({ url: s.url, device_id: s.device_id, device_name: s.device_name, key });
  return parsed.success ? { link: parsed.data } : { link: null, reason: 'the hub link is damaged: join again with mia sync join' };
}

export function readHubLink(dataDir: string, box: SecretBox | null = null): HubLink | null {
  return openHubLink(dataDir, box).link;
}

/** Seals a key written in the clear, once a keychain is at hand (the desktop app's start). */
export function sealHubLink(dataDir: string, box: SecretBox): boolean {
  const s = readStored(dataDir);
  if (!s || s.key === undefined) return false;
  writeHubLink(dataDir, { url: s.url, device_id: s.device_id, device_name: s.device_name, key: s.key }, box);
  return true;
}

/** Written whole under a temporary name and renamed: a crash leaves the old link or the new. */
export function writeHubLink(dataDir: string, link: HubLink, box: SecretBox | null = null): void {
  const dir = join(dataDir, 'sync');
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const temp = join(dir, `.hub.${process.pid}.tmp`);
  const valid = linkSchema.parse(link);
  const record = box ? { url: valid.url, device_id: valid.device_id, device_name: valid.device_name, key_sealed: box.seal(valid.key) } : valid;
  writeFileSync(temp, JSON.stringify(record), { mode: PRIVATE_FILE_MODE });
  const fd = openSync(temp, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, join(dataDir, HUB_LINK_FILE));
}
