/**
 * CSV writing per RFC 4180: CRLF line ends, fields with comma, quote or line breaks quoted,
 * quotes doubled. Text cells that a spreadsheet would run as a formula (leading = + - @ tab CR)
 * get a leading apostrophe (OWASP "CSV injection"), which keeps the text readable; numbers are
 * written as numbers and never altered.
 */
export type CsvCell = string | number | boolean | null;

const FORMULA_START = /^[=+\-@\t\r]/;

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
