/**
 * Keyset pagination over internal row ids. The cursor is opaque to clients (base64url of the
 * last id seen), stable under concurrent inserts, and costs one indexed range scan per page.
 */
export type PageRequest = { afterId: number; limit: number };
export type Page<T> = { items: T[]; nextAfterId: number | null };

/** Callers fetch limit + 1 rows; the extra row only tells whether another page exists. */
export function toPage<T extends { id: number }>(rows: T[], limit: number): Page<T> {
  const items = rows.slice(0, limit);
  const last = items.at(-1);
  return { items, nextAfterId: rows.length > limit && last ? last.id : null };
}
