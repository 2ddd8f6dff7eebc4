/** Request and response shapes of sync (docs/sync.md, Transport) and of the devices admin. */
import { z } from 'zod';
import { SYNC_ENTITIES } from '#server/sync/replica.ts';
import { MAX_PUSH_CHANGES } from '#server/sync/push.ts';
import { MAX_PULL } from '#server/sync/pull.ts';
import { MAX_MISSING_QUERY, SHA256_PATTERN } from '#server/sync/blobs.ts';
import { UUID7_PATTERN } from '#server/sync/uuid7.ts';

/** The sync protocol this mia speaks; a client sends it as Mia-Sync-Protocol. */
export const SYNC_PROTOCOL = 1;
export const SYNC_PROTOCOL_HEADER = 'mia-sync-protocol';

const sha256 = z.string().regex(SHA256_PATTERN, 'a SHA-256 in lower-case hex');

export const pushedChange = z.object({
  change_id: z.string().regex(UUID7_PATTERN, 'a UUIDv7'),
  entity: z.enum(SYNC_ENTITIES),
  key: z.string().min(1).max(128),
  op: z.literal('put'),
  hlc: z.string().min(1).max(100),
  user_id: z.string().min(1).max(100).nullable(),
  payload: z.record(z.string(), z.unknown()),
});

export const pushBody = z.object({
  changes: z.array(pushedChange).min(1).max(MAX_PUSH_CHANGES, `at most ${MAX_PUSH_CHANGES} changes per push`),
}).strict();

/** A change as pushed; the hub's answer, as received. */
export type PushedChange = z.output<typeof pushedChange>;

export const pushResponse = z.object({
  results: z.array(z.object({ change_id: z.string(), status: z.enum(['accepted', 'rejected']), reason: z.string().optional(), retry: z.boolean().optional() })),
  accepted: z.number().int(),
  rejected: z.number().int(),
  warning: z.string().nullable(),
  hub_time: z.string(),
});

export const pullQuery = z.object({
  cursor: z.string().max(200).optional(),
  limit: z.coerce.number().int().min(1).max(MAX_PULL).default(500),
}).strict();

export const pullResponse = z.object({
  changes: z.array(z.object({
    change_id: z.string(),
    device_id: z.string(),
    entity: z.enum(SYNC_ENTITIES),
    key: z.string(),
    op: z.literal('put'),
    hlc: z.string(),
    user_id: z.string().nullable(),
    payload: z.unknown(),
  })),
  cursor: z.string(),
  has_more: z.boolean(),
  hub_time: z.string(),
});

export type PushResponse = z.output<typeof pushResponse>;
export type PullResponse = z.output<typeof pullResponse>;

export const missingBody = z.object({ sha256: z.array(sha256).min(1).max(MAX_MISSING_QUERY) }).strict();
export const missingResponse = z.object({ missing: z.array(z.string()) });
export const blobParams = z.object({ sha256 });
export const bucketStored = z.object({ stored: z.number().int(), present: z.number().int(), bytes: z.number().int() });
export const blobStored = z.object({
  sha256: z.string(),
  bytes: z.number().int(),
  stored: z.boolean(),
  received: z.number().int().describe('Bytes of the file the hub holds now'),
  complete: z.boolean().describe('Whether the file is whole on the hub (false: send the next range)'),
});
export const uploadState = z.object({ sha256: z.string(), received: z.number().int(), complete: z.boolean() });

const entityDigest = z.object({ count: z.number().int(), sha256: z.string() });
export const digestQuery = z.object({
  studies: z.string().max(100_000).optional().describe('Comma-separated Study Instance UIDs: the digest of these studies only'),
}).strict();
export const digestResponse = z.object({ instance: entityDigest, analysis: entityDigest, review: entityDigest, report: entityDigest });

export const helloResponse = z.object({ device_id: z.string(), device_name: z.string(), protocol: z.number().int(), hub_time: z.string() });

export const device = z.object({
  id: z.string(),
  name: z.string(),
  key_id: z.string(),
  key_prefix: z.string(),
  status: z.enum(['active', 'revoked']),
  enrolled_by: z.string(),
  created_at: z.string(),
  last_seen_at: z.string().nullable(),
  lag: z.number().int(),
  clock_offset_ms: z.number().int().nullable(),
  revoked_at: z.string().nullable(),
  audit_gap_events: z.number().int().describe('Audit event numbers of this device that never reached the hub'),
});
export const enrollBody = z.object({ name: z.string().min(1).max(64) }).strict();
export const enrolled = z.object({ device, key: z.string().describe('The device key: shown once, stored as a digest only') });
export const deviceParams = z.object({ device_id: z.string().regex(UUID7_PATTERN, 'a device id (UUIDv7)') });

export const syncStatus = z.object({
  linked: z.boolean(),
  hub_url: z.string().nullable(),
  device_id: z.string().nullable(),
  device_name: z.string().nullable(),
  state: z.enum(['not_linked', 'online', 'offline', 'syncing']),
  pending: z.number().int(),
  waiting_reason: z.string().nullable(),
  refused: z.number().int(),
  last_sync_at: z.string().nullable(),
  last_attempt_at: z.string().nullable(),
  last_error: z.string().nullable(),
});

