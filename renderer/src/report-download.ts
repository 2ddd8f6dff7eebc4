/**
 * One report as a file. The API serves CSV and XML on the report list only (GET /v1/reports,
 * filtered by scan), and a scan may hold several reports (a new draft after a final one), so the
 * list's document is cut down to the report on screen. Cutting keeps the server's own
 * serialization - the documented column order, RFC 4180 quoting, the formula-injection guard,
 * the XML element names - instead of a second serializer in the renderer that could drift.
 */

/** Splits CSV text into its records, each with its line end, without changing a byte. */
export function csvRecords(text: string): string[] {
  const records: string[] = [];
  let start = 0;
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (c === '"') quoted = !quoted;
    else if (c === '\n' && !quoted) {
      records.push(text.slice(start, i + 1));
      start = i + 1;
    }
  }
  if (start < text.length) records.push(text.slice(start));
  return records;
}

/** The first field of a CSV record, unquoted. */
export function firstCsvField(record: string): string {
  if (!record.startsWith('"')) return /^[^,\r\n]*/.exec(record)?.[0] ?? '';
  let value = '';
  for (let i = 1; i < record.length; i += 1) {
    if (record[i] === '"') {
      if (record[i + 1] === '"') {
        value += '"';
        i += 1;
      } else break;
    } else value += record[i];
  }
  return value;
}

/** The header and the one record whose `id` column (the first, docs/formats.md) is `reportId`. */
export function onlyReportCsv(csv: string, reportId: string): string | null {
  const [header, ...rows] = csvRecords(csv);
  if (header === undefined || firstCsvField(header) !== 'id') return null;
  const row = rows.find((record) => firstCsvField(record) === reportId);
  return row === undefined ? null : header + row;
}

function escapeXmlText(text: string): string {
  return text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;').replaceAll("'", '&apos;');
}

/**
 * The document with only the <report> element of `reportId`. Report elements never nest (their
 * findings are <finding>) and text is escaped, so "<report>" and "</report>" in the document are
 * element boundaries; each report's first child is its <id> (server/formats/xml.ts writes the
 * record's keys in order, id first).
 */
export function onlyReportXml(xml: string, reportId: string): string | null {
  const reports = [...xml.matchAll(/<report>[\s\S]*?<\/report>/g)];
  const first = reports[0];
  const last = reports.at(-1);
  if (first === undefined || last === undefined) return null;
  const wanted = `<report><id>${escapeXmlText(reportId)}</id>`;
  const kept = reports.find((match) => match[0].startsWith(wanted));
  if (kept === undefined) return null;
  return xml.slice(0, first.index) + kept[0] + xml.slice(last.index + last[0].length);
}
