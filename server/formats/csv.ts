/**
 * CSV writing per RFC 4180: CRLF line ends, fields with comma, quote or line breaks quoted,
 * quotes doubled. Text cells that a spreadsheet could run as a formula get a leading apostrophe
 * (OWASP "CSV Injection"; ASVS 5.0 1.2.10), which keeps the text readable; numbers are written
 * as numbers and never altered.
 */
export type CsvCell = string | number | boolean | null;

/**
 * A cell that starts with a control character (tab, CR, LF, NUL: OWASP and ASVS name tab, CR
 * and NUL), or whose first visible character is a formula or DDE trigger: = + - @ and |
 * (=cmd|'/c calc'!A1), or their full-width and small forms (＝ ＋ － ＠ ｜ ﹦ ﹢ ﹣ ﹫), which
 * some spreadsheets read as the ASCII ones. Some spreadsheets and import dialogs trim leading
 * whitespace, so spaces or line breaks before a trigger do not hide it.
 */
const FORMULA_START = /^(?:[\t\r\n\0]|\s*[=+\-@|\uFF1D\uFF0B\uFF0D\uFF20\uFF5C\uFE66\uFE62\uFE63\uFE6B])/;

/** An ASCII letter or digit first: neither a control character, whitespace nor a trigger. */
function startsPlain(text: string): boolean {
  const c = text.charCodeAt(0);
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

const NEEDS_QUOTES = /[",\r\n]/;

export function csvField(cell: CsvCell): string {
  if (cell === null) return '';
  if (typeof cell === 'number') return Number.isFinite(cell) ? String(cell) : '';
  if (typeof cell === 'boolean') return cell ? 'true' : 'false';
  const text = startsPlain(cell) || !FORMULA_START.test(cell) ? cell : `'${cell}`;
  return NEEDS_QUOTES.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

/** The header line: the column names as cells. */
export function csvHeader(columns: readonly string[]): string {
  return columns.map(csvField).join(',') + '\r\n';
}

export function toCsv(columns: readonly string[], rows: readonly Record<string, CsvCell>[]): string {
  return csvHeader(columns) + csvLines(columns, rows);
}

/** The rows as lines without the header, each cell taken by its column's name. */
export function csvLines(columns: readonly string[], rows: readonly Record<string, CsvCell>[]): string {
  let out = '';
  for (const row of rows) {
    for (let i = 0; i < columns.length; i += 1) {
      const column = columns[i] ?? '';
      out += i === 0 ? csvField(row[column] ?? null) : `,${csvField(row[column] ?? null)}`;
    }
    out += '\r\n';
  }
  return out;
}
