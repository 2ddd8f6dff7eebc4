/**
 * Where a workstation keeps its hub: the hub's URL, its device id and the device key, in
 * <data>/sync/hub.json, readable by the account running mia only (0600). The desktop app may
 * hand in the key decrypted from the OS keychain instead (main/), so the file then holds no key.
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync, openSync, fsyncSync, closeSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { keyShapeProblem } from '#server/auth/key-format.ts';
import { PRIVATE_DIR_MODE, PRIVATE_FILE_MODE } from '#server/private-files.ts';

export const HUB_LINK_FILE = join('sync', 'hub.json');

const linkSchema = z.object({
  url: z.string().url(),
  device_id: z.string().min(1).max(100),
  device_name: z.string().max(100),
  key: z.string().refine((k) => keyShapeProblem(k) === undefined, 'a device key'),
});
export type HubLink = z.infer<typeof linkSchema>;

export function readHubLink(dataDir: string): HubLink | null {
  let text: string;
  try {
    text = readFileSync(join(dataDir, HUB_LINK_FILE), 'utf8');
  } catch {
    return null;
  }
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    // A damaged file links to nothing; mia sync join writes it again.
    return null;
  }
  const parsed = linkSchema.safeParse(json);
  return parsed.success ? parsed.data : null;
}

/** Written whole under a temporary name and renamed: a crash leaves the old link or the new. */
export function writeHubLink(dataDir: string, link: HubLink): void {
  const dir = join(dataDir, 'sync');
  mkdirSync(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  const temp = join(dir, `.hub.${process.pid}.tmp`);
  writeFileSync(temp, JSON.stringify(linkSchema.parse(link)), { mode: PRIVATE_FILE_MODE });
  const fd = openSync(temp, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, join(dataDir, HUB_LINK_FILE));
}
