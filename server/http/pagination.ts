/** Opaque list cursors (PRODUCT.md, Lists): clients pass next_cursor back unchanged. */
import { MiaError } from '#server/errors.ts';
import type { PageRequest } from '#server/store/page.ts';

export function encodeCursor(afterId: number | null): string | null {
  return afterId === null ? null : Buffer.from(JSON.stringify({ a: afterId })).toString('base64url');
}

export function pageRequest(query: { limit: number; cursor?: string | undefined }): PageRequest {
  if (query.cursor === undefined) return { afterId: 0, limit: query.limit };
  try {
    const parsed: unknown = JSON.parse(Buffer.from(query.cursor, 'base64url').toString('utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'a' in parsed && Number.isSafeInteger(parsed.a) && Number(parsed.a) >= 0) {
      return { afterId: Number(parsed.a), limit: query.limit };
    }
  } catch {
    // Falls through to the error below: a cursor that is not ours.
  }
  throw new MiaError('invalid', 'Invalid cursor', 'cursor: pass the next_cursor of a previous page unchanged');
}
