/**
 * The hub's side of a push (POST /v1/sync/push, docs/sync.md): at most 500 changes of one device,
 * under an Idempotency-Key, taken in one durable transaction and answered change by change only
 * after it committed.
 *
 * - A change id seen before is accepted again without being applied twice (the device lost the
 *   answer and sent the batch again, perhaps under a new key).
 * - A timestamp over a day ahead of the hub's clock refuses that change alone, for now, with the
 *   reason; over 5 minutes ahead is taken with a warning. The hub's clock moves on only once the batch
 *   has committed, so a batch that failed leaves it where it was.
 * - A change by a user the hub knows as disabled is refused: users are the hub's to manage.
 * - The same key sent with another body is refused (409): a key names one request.
 */
import { createHash } from 'node:crypto';
import { conflict, forbidden } from '#server/errors.ts';
import type { RefCache } from '#server/imports/ingest.ts';
import type { Services } from '#server/services.ts';
import type { Database } from '#server/store/database.ts';
import { findReceipt, insertReceipt, recordDeviceClock } from '#server/store/devices.ts';
import { appendChanges, hasChange } from '#server/store/sync-log.ts';
import { findUserByPublicId } from '#server/store/users.ts';
import { quarantineChange } from '#server/store/quarantine.ts';
import { applyChange, prepareChanges, type ApplyOutcome, type RemoteChange } from '#server/sync/entities.ts';
import { parseHlc, type HlcTimestamp } from '#server/sync/hlc.ts';
// Types only: the schemas module imports this one's limits.
import type { PushedChange, PushResponse } from '#server/api/sync-schemas.ts';

export const MAX_PUSH_CHANGES = 500;

export type Pusher = { ref: number; id: string };

function isConstraintViolation(err: unknown): boolean {
  const code = typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : '';
  return code.startsWith('SQLITE_CONSTRAINT') || code === '23505' || code === '23503' || code === '23514';
}

export async function receivePush(
  s: Services,
  device: Pusher,
  idempotencyKey: string,
  changes: readonly PushedChange[],
  deviceTimeMs: number | null,
): Promise<PushResponse> {
  const requestSha = createHash('sha256').update(JSON.stringify(changes)).digest('hex');
  const earlier = await findReceipt(s.db, device.ref, idempotencyKey);
  if (earlier) {
    if (earlier.request_sha256 !== requestSha) throw conflict('Idempotency-Key reused for another push', `key ${idempotencyKey.slice(0, 80)} named a different batch; use a new key per batch`);
    return JSON.parse(earlier.response) as PushResponse;
  }

  const outcomes = new Map<string, ApplyOutcome>();
  const stamps = new Map<string, HlcTimestamp>();
  for (const c of changes) {
    const t = parseHlc(c.hlc);
    if (!t) outcomes.set(c.change_id, { status: 'rejected', reason: `hlc ${c.hlc.slice(0, 80)} is not a timestamp`, retry: false });
    else stamps.set(c.change_id, t);
  }
  // Each timestamp is judged alone: one far-future change must not refuse its batch.
  let warning: string | null = null;
  for (const [id, t] of stamps) {
    const judged = s.replica.hlc.receive([t]);
    if (!judged.ok) {
      // Later, not never: the device keeps the change and sends it again; once its clock is right
      // and time has caught up with the stamp, it goes in. Meanwhile the reason is shown there.
      outcomes.set(id, { status: 'rejected', reason: judged.reason, retry: true });
      stamps.delete(id);
    } else warning ??= judged.warning;
  }
  const received = s.replica.hlc.receive([...stamps.values()]);

  const candidates = changes.filter((c) => !outcomes.has(c.change_id));
  const prepared = await prepareChanges(s.db, s.dataDir, candidates.map((c) => ({ change_id: c.change_id, device_id: device.id, entity: c.entity, key: c.key, hlc: c.hlc, user_id: c.user_id, payload: c.payload })));
  const at = s.clock.now().toISOString();

  const response = await s.db.transaction(async (tx) => {
    const results = new Map(outcomes);
    const refs: RefCache = new Map();
    const take: PushedChange[] = [];
    for (const c of candidates) {
      if (await hasChange(tx, c.change_id)) {
        results.set(c.change_id, { status: 'accepted' });
        continue;
      }
      const judged = await judgeActingUser(tx, device.id, c, stamps.get(c.change_id), at);
      if (judged) {
        results.set(c.change_id, judged);
        continue;
      }
      const outcome = await applyOne(tx, device.id, c, prepared, refs, at);
      results.set(c.change_id, outcome);
      if (outcome.status === 'accepted') take.push(c);
    }
    await appendChanges(
      tx,
      take.map((c) => ({ changeId: c.change_id, deviceId: device.id, entity: c.entity, entityKey: c.key, op: c.op, hlc: c.hlc, userId: c.user_id, payload: JSON.stringify(c.payload) })),
      at,
    );
    const list: PushResponse['results'] = changes.map((c) => {
      const r = results.get(c.change_id) ?? { status: 'rejected', reason: 'not processed', retry: true };
      return r.status === 'accepted' ? { change_id: c.change_id, status: 'accepted' } : { change_id: c.change_id, status: 'rejected', reason: r.reason, retry: r.retry };
    });
    const body: PushResponse = {
      results: list,
      accepted: list.filter((r) => r.status === 'accepted').length,
      rejected: list.filter((r) => r.status === 'rejected').length,
      warning,
      hub_time: at,
    };
    // An answer that asks for changes again later is not kept: the same batch sent again must be
    // judged again (its file may be here now, its user known), not given the old answer.
    if (list.every((r) => r.status === 'accepted' || r.retry !== true)) await insertReceipt(tx, device.ref, idempotencyKey, requestSha, JSON.stringify(body), at);
    return body;
  }, { durable: true });

  // Only now, after the commit, do the batch's timestamps count on the hub's clock.
  if (received.ok) s.replica.hlc.advance(received.state);
  if (deviceTimeMs !== null) {
    try {
      await recordDeviceClock(s.db, device.ref, Math.round(deviceTimeMs - Date.parse(at)));
    } catch {
      // Informational (the devices screen's skew); the push itself is committed.
    }
  }
  return response;
}

/** Changes whose author matters: what a person decided or wrote, not what a machine made. */
const AUTHORED: ReadonlySet<string> = new Set(['review', 'report', 'addendum', 'finding']);

/**
 * The acting user, checked on the hub (docs/sync.md, Users). A change by a user the hub had
 * disabled before the change was made is quarantined for an admin; one made before the user was
 * disabled stands (the reader was entitled to it when they worked offline). An authored change
 * by someone the hub does not know waits: an admin adds them on the hub (same email), the
 * workstation's next round takes them in, and the change goes.
 */
async function judgeActingUser(tx: Database, deviceId: string, c: PushedChange, stamp: HlcTimestamp | undefined, at: string): Promise<ApplyOutcome | undefined> {
  if (c.user_id === null) return undefined;
  const user = await findUserByPublicId(tx, c.user_id);
  if (!user) {
    if (!AUTHORED.has(c.entity)) return undefined;
    return { status: 'rejected', reason: `user ${c.user_id} is not a user of the hub; an admin adds them there (the same email), and this change goes in after the next sync`, retry: true };
  }
  if (user.status === 'active' || user.disabled_at === null || stamp === undefined) return user.status === 'active' ? undefined : { status: 'rejected', reason: `user ${c.user_id} is disabled on the hub`, retry: false };
  const disabledMs = Date.parse(user.disabled_at);
  if (stamp.wall < disabledMs) return undefined;
  const reason = `user ${c.user_id} was disabled on the hub at ${user.disabled_at}, before this change was made (${new Date(stamp.wall).toISOString()})`;
  await quarantineChange(tx, { change_id: c.change_id, device_id: deviceId, entity: c.entity, entity_key: c.key, reason, payload: JSON.stringify(c.payload), created_at: at, hlc: c.hlc, user_id: c.user_id });
  return { status: 'rejected', reason: `quarantined for an admin: ${reason}`, retry: false };
}

/** One change in its own savepoint: a row the schema refuses refuses that change, not the batch. */
async function applyOne(tx: Database, device: string, c: PushedChange, prepared: Parameters<typeof applyChange>[2], refs: RefCache, at: string): Promise<ApplyOutcome> {
  const remote: RemoteChange = { change_id: c.change_id, device_id: device, entity: c.entity, key: c.key, hlc: c.hlc, user_id: c.user_id, payload: c.payload };
  try {
    return await tx.transaction(async (inner) => await applyChange(inner, remote, prepared, refs, at));
  } catch (err) {
    if (isConstraintViolation(err)) {
      refs.clear();
      return { status: 'rejected', reason: `${c.entity} ${c.key} conflicts with a row already here`, retry: false };
    }
    throw err;
  }
}

/** A push needs a device: its changes are that device's. */
export function requireDevice(device: Pusher | null): Pusher {
  if (!device) throw forbidden('Sync needs a device key', 'enroll this workstation on the hub (mia devices enroll NAME) and use its key');
  return device;
}
