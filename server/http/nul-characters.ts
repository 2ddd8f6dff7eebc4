/**
 * Text with a NUL character (U+0000) is refused at the edge, wherever it is in a request: PostgreSQL
 * cannot store it in a text value (a hub answered 500 to `GET /v1/users/%00`), SQLite stores it but
 * some of its string functions stop at it, and no identifier, filter or free text mia keeps needs it.
 */

/** Nesting beyond this is not searched: request bodies are small JSON, limited in size already. */
const MAX_DEPTH = 64;

/** Where the first NUL is ("text", "findings.2.note", or `where` for a bare string), or null. */
export function nulCharacterAt(value: unknown, where: string): string | null {
  const search = (v: unknown, path: string[], depth: number): string | null => {
    if (typeof v === 'string') return v.includes('\u0000') ? (path.length > 0 ? path.join('.') : where) : null;
    if (typeof v !== 'object' || v === null || depth >= MAX_DEPTH) return null;
    for (const [key, item] of Array.isArray(v) ? v.entries() : Object.entries(v)) {
      const at = [...path, String(key)];
      if (typeof key === 'string' && key.includes('\u0000')) return at.join('.');
      const found = search(item, at, depth + 1);
      if (found !== null) return found;
    }
    return null;
  };
  return search(value, [], 0);
}
