/**
 * The DICOM listener's configuration (issue 14) and the calling-AE check used until the DICOM
 * peers module decides it: a list of AE@host entries (`--dicom-allow`).
 */
import { isIP } from 'node:net';
import { z } from 'zod';
import { isValidAeTitle } from '#server/dimse/pdu.ts';
import type { CallerIdentity, IsCallerAllowed } from '#server/dimse/scp.ts';

/** A calling AE title and the host it must call from ('*': any host). */
export type AllowedCaller = { aeTitle: string; host: string };

export const dicomConfigSchema = z.object({
  port: z.number().int().min(0).max(65535),
  /** Modalities call from other machines; the allow list, not the address, keeps strangers out. */
  host: z.string().min(1).default('0.0.0.0'),
  aeTitle: z.string().refine(isValidAeTitle, 'an AE title is 1-16 printable characters, no backslash').default('MIA'),
  allow: z.array(z.object({ aeTitle: z.string(), host: z.string() })).default([]),
  maxAssociations: z.number().int().min(1).max(1024).default(16),
  associationTimeoutMs: z.number().int().min(100).max(600_000).default(30_000),
  idleTimeoutMs: z.number().int().min(100).max(3_600_000).default(120_000),
  /** 512 KiB: few PDUs per instance; bounded per association. */
  maxPduLength: z.number().int().min(4096).max(4 * 1024 * 1024).default(512 * 1024),
  /** As uploads (2 GiB): a large multi-frame study fits; a runaway sender does not fill the disk. */
  maxInstanceBytes: z.number().int().min(1024).max(64 * 1024 ** 3).default(2 * 1024 ** 3),
  /**
   * An instance up to this size is received in memory and answered once it is durable in the
   * intake log (docs/dicom-network.md); a larger one is spooled to a file and answered once it is
   * indexed. 0: every instance is spooled.
   */
  memoryInstanceBytes: z.number().int().min(0).max(256 * 1024 ** 2).default(8 * 1024 ** 2),
  /** How long the indexer gathers answered instances into one batch (a release cuts it short). */
  indexLingerMs: z.number().int().min(0).max(600_000).default(100),
});
export type DicomConfig = z.infer<typeof dicomConfigSchema>;
export type DicomConfigInput = z.input<typeof dicomConfigSchema>;

/** "AE@host" (host an IP address, localhost or *); a bare "AE" is refused: say which host. */
export function parseAllowedCaller(entry: string): AllowedCaller | { error: string } {
  const at = entry.lastIndexOf('@');
  if (at <= 0) return { error: `${entry}: expected AE@host (host an IP address, localhost or *)` };
  const aeTitle = entry.slice(0, at);
  const host = entry.slice(at + 1);
  if (!isValidAeTitle(aeTitle)) return { error: `${entry}: ${aeTitle} is not an AE title (1-16 characters, no backslash)` };
  // A caller is let in by its own AE title: "*" would read as "any caller" and match none.
  if (aeTitle.includes('*')) return { error: `${entry}: name each calling AE title (* stands for any host, not for any AE title)` };
  if (host !== '*' && host !== 'localhost' && isIP(host) === 0) return { error: `${entry}: ${host} is not an IP address, localhost or *` };
  return { aeTitle, host };
}

const LOOPBACK = new Set(['127.0.0.1', '::1']);

export function allowListCheck(allow: readonly AllowedCaller[]): IsCallerAllowed {
  return (caller: CallerIdentity) =>
    Promise.resolve(
      allow.some(
        (a) => a.aeTitle === caller.callingAeTitle && (a.host === '*' || a.host === caller.host || (a.host === 'localhost' && LOOPBACK.has(caller.host))),
      ),
    );
}
