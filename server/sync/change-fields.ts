/**
 * What every synced entity's payload is made of (UIDs, public ids, times, a finding's place) and
 * how taking a change in ends: accepted, or refused with a reason (and whether to send it again).
 * Shared by server/sync/entities.ts and server/reports/report-sync.ts.
 */
import { z } from 'zod';

export const uid = z.string().min(1).max(64).regex(/^[0-9.]+$/, 'a DICOM UID');
export const publicId = (prefix: string): z.ZodString => z.string().regex(new RegExp(`^${prefix}_[0-9a-f]{24}$`), `a ${prefix}_ id`);
export const isoTime = z.string().max(40);

/** Where a finding is: its box on one frame of one instance. */
export const findingPlace = {
  label: z.string().min(1).max(200),
  x: z.number().finite(),
  y: z.number().finite(),
  width: z.number().finite().min(0),
  height: z.number().finite().min(0),
  instance_uid: uid,
  frame: z.number().int().min(0).max(100_000),
};

/** waitsFor: what a change to be tried again waits for (a wait key, server/sync/wait-keys.ts). */
export type ApplyOutcome = { status: 'accepted' } | { status: 'rejected'; reason: string; retry: boolean; waitsFor?: string | undefined };
export const accepted: ApplyOutcome = { status: 'accepted' };
export const refused = (reason: string, retry = false): ApplyOutcome => ({ status: 'rejected', reason, retry });
/** Names what is not here yet: tried again when `waitsFor` arrives (null: every round). */
export const waiting = (reason: string, waitsFor: string | null): ApplyOutcome => ({ status: 'rejected', reason, retry: true, ...(waitsFor === null ? {} : { waitsFor }) });

/** A payload that does not parse, named by its first problem. */
export const payloadProblem = (entity: string, error: z.ZodError): ApplyOutcome => refused(`${entity} payload: ${error.issues[0]?.path.join('.') ?? ''} ${error.issues[0]?.message ?? 'invalid'}`);
