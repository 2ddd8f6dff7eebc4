/**
 * Case- and accent-insensitive search for the worklist (issue 11: search by name and
 * accession). SQLite's LIKE and lower() fold ASCII only, and names are decoded from many
 * DICOM character sets (server/dicom/charset.ts): "müller" must find MÜLLER^HANS and "muller"
 * too, so both sides go through one JavaScript fold, registered on each connection.
 */
import type BetterSqlite3 from 'better-sqlite3';

export const SEARCH_FOLD_FUNCTION = 'mia_search_fold';

/** Lower case without diacritics; PN component (^) and group (=) separators become spaces. */
export function searchFold(text: string): string {
  return text
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLocaleLowerCase('en')
    .replace(/[\^=]/g, ' ');
}

/** Words of a search, folded; empty for a blank one. */
export function searchWords(query: string): string[] {
  return searchFold(query)
    .split(/[\s,]+/)
    .filter((word) => word.length > 0);
}

export function registerSearchFold(db: BetterSqlite3.Database): void {
  db.function(SEARCH_FOLD_FUNCTION, { deterministic: true }, (value: unknown) => (typeof value === 'string' ? searchFold(value) : ''));
}
