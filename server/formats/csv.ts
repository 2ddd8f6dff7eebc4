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

export function csvField(cell: CsvCell): string {
  if (cell === null) return '';
  if (typeof cell === 'number') return Number.isFinite(cell) ? String(cell) : '';
  if (typeof cell === 'boolean') return cell ? 'true' : 'false';
  const text = FORMULA_START.test(cell) ? `'${cell}` : cell;
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}

export function toCsv(columns: readonly string[], rows: readonly Record<string, CsvCell>[]): string {
  const lines = [columns.map(csvField).join(',')];
  for (const row of rows) lines.push(columns.map((column) => csvField(row[column] ?? null)).join(','));
  return lines.join('\r\n') + '\r\n';
}
