/** Why signing in failed, sorted by what the person can do about it (KeyScreen.tsx). */
import { ApiError } from './api/client.ts';

export type KeyProblemKind = 'rejected' | 'unreachable' | 'rate_limited' | 'other';
export type KeyProblem = { kind: KeyProblemKind; message: string } | null;

/** 401: the key itself; status 0: no answer at all (the client's "Server unreachable"); 429: too
 * many failed attempts from this address (the server slows key guessing down). */
export function keyProblemOf(error: unknown): NonNullable<KeyProblem> {
  const status = error instanceof ApiError ? error.info.status : null;
  const kind: KeyProblemKind = status === 401 ? 'rejected' : status === 0 ? 'unreachable' : status === 429 ? 'rate_limited' : 'other';
  return { kind, message: error instanceof Error ? error.message : String(error) };
}
