/**
 * Whether a DICOM node calling mia's SCP is one the admin allowed: its calling AE title names a
 * peer with "allow incoming", and it calls from that peer's host. A host given as a name is
 * resolved at each check (a PACS may move), bounded by a timeout so a slow DNS cannot hold an
 * association open.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { incomingPeersFor } from '#server/peers/peers.ts';
import type { Clock } from '#server/clock.ts';
import type { Database } from '#server/store/database.ts';

const LOOKUP_TIMEOUT_MS = 2000;

/** ::ffff:10.0.0.5 is 10.0.0.5; loopback in either family is loopback. */
export function normalizeAddress(address: string): string {
  const lower = address.toLowerCase();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower);
  if (mapped?.[1]) return mapped[1];
  if (lower === '::1') return '127.0.0.1';
  return lower;
}

async function addressesOf(host: string): Promise<string[]> {
  if (isIP(host) !== 0) return [normalizeAddress(host)];
  const timeout = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('lookup timed out')), LOOKUP_TIMEOUT_MS).unref());
  try {
    const found = await Promise.race([lookup(host, { all: true }), timeout]);
    return found.map((a) => normalizeAddress(a.address));
  } catch {
    return [];
  }
}

export async function callerAllowed(deps: { db: Database; clock: Clock }, caller: { callingAeTitle: string; host: string }): Promise<boolean> {
  const from = normalizeAddress(caller.host);
  for (const peer of await incomingPeersFor(deps, caller.callingAeTitle)) {
    if ((await addressesOf(peer.host)).includes(from)) return true;
  }
  return false;
}
