/**
 * The pull cursor: opaque to clients (they send back what they got), versioned so a later mia
 * can change what it holds, and checked on the way in so a made-up one is a clear 400.
 */
import { MiaError } from '#server/errors.ts';

const VERSION = 1;

export function encodeCursor(seq: number): string {
  return Buffer.from(JSON.stringify({ v: VERSION, seq }), 'utf8').toString('base64url');
}

/** The change number a cursor stands for; no cursor is the start of the log. */
export function decodeCursor(cursor: string | undefined): number {
  if (cursor === undefined || cursor === '') return 0;
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || !('v' in parsed) || !('seq' in parsed)) {
    throw new MiaError('invalid', 'Invalid sync cursor', 'cursor: send back the cursor a pull returned, or none to start');
  }
  if (parsed.v !== VERSION) throw new MiaError('invalid', 'Sync cursor from another protocol version', `cursor: version ${String(parsed.v)}, this hub reads ${VERSION}; pull again without a cursor`);
  const seq = parsed.seq;
  if (typeof seq !== 'number' || !Number.isSafeInteger(seq) || seq < 0) {
    throw new MiaError('invalid', 'Invalid sync cursor', 'cursor: send back the cursor a pull returned, or none to start');
  }
  return seq;
}
