/**
 * Text with a NUL character (U+0000) is refused at the edge, wherever it is in a request: PostgreSQL
 * cannot store it in a text value (a hub answered 500 to `GET /v1/users/%00`), SQLite stores it but
 * some of its string functions stop at it, and no identifier, filter or free text mia keeps needs it.
 */

/** Nesting beyond this is not searched: request bodies are small JSON, limited in size already. */
const MAX_DEPTH = 64;

/** Where the first NUL is ("text", "findings.2.note", or `where` for a bare string), or null. */
export function nulCharacterAt(value: unknown, where: string): string | null {
  const found = search(value, 0);
  if (found === null) return null;
  return found.length > 0 ? found.reverse().join('.') : where;
}

/**
 * The keys leading to the first NUL, innermost first, or null. Every request's path, query and
 * body pass through here, so the path is only built on the way back from a find.
 */
function search(value: unknown, depth: number): string[] | null {
  if (typeof value === 'string') return value.includes('\u0000') ? [] : null;
  if (typeof value !== 'object' || value === null || depth >= MAX_DEPTH) return null;
  for (const [key, item] of Array.isArray(value) ? value.entries() : Object.entries(value)) {
    if (typeof key === 'string' && key.includes('\u0000')) return [key];
    const found = search(item, depth + 1);
    if (found !== null) {
      found.push(String(key));
      return found;
    }
  }
  return null;
}
