/**
 * An export's document, cut so its pages can be made apart (in this thread, or in worker threads:
 * export-worker.ts) and joined in order: the head, each page's text, what goes between two pages,
 * and the tail. A page is the results of scans in a range of row ids, read and serialized with the
 * same serializers as the API.
 */
import type { ExportFormat } from '#common/vocabulary.ts';
import type { ExportFilters, ScanResultV11 } from '#server/api/schemas.ts';
import type { Pseudonymizer } from '#server/exports/pseudonyms.ts';
import { csvHeader } from '#server/formats/csv.ts';
import { csvRecords, xmlDocument } from '#server/formats/documents.ts';
import { scanResultSerializer } from '#server/formats/serializers.ts';
import { xmlElement, type XmlValue } from '#server/formats/xml.ts';
import { listResults, type ScanDeps } from '#server/scans/scans.ts';
import type { ResultFilter } from '#server/store/scans.ts';

// Scans per page read (0-6 findings each). Smaller pages measured better on both counts at
// 100,000 scans: CSV at 1,000 a page 7.1 s and +107 MB peak RSS, 250 5.7 s and +71 MB, 100
// 4.2 s and +53 MB (young objects die young instead of being promoted). JSON and XML write about
// three times the text per scan, so a quarter of the scans keep pages alike in size: JSON at 100
// peaked 86 MB above the process's start, at 25 46 MB, in the same time.
export const PAGE_SCANS: Record<ExportFormat, number> = { csv: 100, json: 25, xml: 25 };

export type DocumentHeader = Record<string, string | boolean | number>;

/**
 * A format's document in parts. The row count is known only at the end: JSON and XML carry it
 * after the results (JSON readers do not care where a key is; XML ones find the element by name).
 */
export type DocumentParts = {
  head(header: DocumentHeader): string;
  page(items: readonly ScanResultV11[]): string;
  /** Written before every page but the first that has results. */
  between: string;
  tail(rowCount: number): string;
};

export function documentParts(format: ExportFormat): DocumentParts {
  switch (format) {
    case 'csv': {
      return {
        head: () => csvHeader(scanResultSerializer.columns),
        page: (items) => csvRecords(scanResultSerializer, items),
        between: '',
        tail: () => '',
      };
    }
    case 'xml': {
      // The document around an empty collection, split where the collection is.
      const collection = scanResultSerializer.collection;
      const itemNames = { ...scanResultSerializer.xmlItemNames, [collection]: scanResultSerializer.item };
      return {
        head: (header) => xmlDocument('export', header, scanResultSerializer, []).replace(new RegExp(`<${collection}></${collection}>\\n?</export>\\n$`), `<${collection}>`),
        page: (items) => items.map((item) => xmlElement(scanResultSerializer.item, item as unknown as XmlValue, itemNames)).join(''),
        between: '',
        tail: (rowCount) => `</${collection}>${xmlElement('row_count', rowCount, itemNames)}</export>\n`,
      };
    }
    case 'json': {
      // A page stringified where the document would hold it, then unwrapped: the same text as
      // one JSON.stringify of the whole document, with no per-item re-indenting.
      const wrapper = { start: '{\n  "scan_results": [', end: '\n  ]\n}' };
      return {
        head: (header) => JSON.stringify(header, null, 2).replace(/\n}$/, ',\n  "scan_results": ['),
        page: (items) => JSON.stringify({ scan_results: items }, null, 2).slice(wrapper.start.length, -wrapper.end.length),
        between: ',',
        tail: (rowCount) => `${rowCount > 0 ? '\n  ' : ''}],\n  "row_count": ${rowCount}\n}\n`,
      };
    }
  }
}

function deidentify(result: ScanResultV11, pseudonyms: Pseudonymizer): ScanResultV11 {
  return {
    ...result,
    patient_id: pseudonyms.patientId(result.patient_id),
    scan_id: pseudonyms.uid(result.scan_id),
    findings: result.findings.map((finding) => ({ ...finding, id: pseudonyms.recordId(finding.id), instance_uid: pseudonyms.uid(finding.instance_uid) })),
    lesions: result.lesions.map((lesion) => ({ ...lesion, id: pseudonyms.recordId(lesion.id), finding_ids: lesion.finding_ids.map((id) => pseudonyms.recordId(id)) })),
    analysis: { ...result.analysis, id: pseudonyms.recordId(result.analysis.id) },
  };
}

function resultFilterOf(filters: ExportFilters): ResultFilter {
  return { scanId: filters.scan_id, patientId: filters.patient_id, modality: filters.modality, label: filters.label, minConfidence: filters.min_confidence };
}

/** Scans after `afterId`, through `throughId` if given (else to the end). */
export type PageRange = { afterId: number; throughId?: number | undefined };

/**
 * A page as UTF-8, made where it was rendered (a worker hands the bytes over without a copy);
 * `written`, when given, is called once the bytes are in the file and no longer needed.
 */
export type RenderedPage = { bytes: Buffer; rows: number; written?: () => void };

/** A page's text and the results it holds. */
export type PageText = { text: string; rows: number };

/**
 * The results of the scans in `range`, as pages of the format's size, each serialized: one
 * indexed range scan per page (keyset on the scan id), so a page at a time is in memory.
 */
export async function* pageTexts(
  deps: ScanDeps,
  format: ExportFormat,
  filters: ExportFilters,
  range: PageRange,
  pseudonyms: Pseudonymizer | undefined,
): AsyncGenerator<PageText> {
  const parts = documentParts(format);
  const filter = { ...resultFilterOf(filters), throughId: range.throughId };
  let afterId = range.afterId;
  for (;;) {
    const page = await listResults(deps, filter, { afterId, limit: PAGE_SCANS[format] }, { once: true });
    const items = pseudonyms ? page.items.map((result) => deidentify(result, pseudonyms)) : page.items;
    if (items.length > 0) yield { text: parts.page(items), rows: items.length };
    if (page.nextAfterId === null) return;
    afterId = page.nextAfterId;
  }
}

/** pageTexts as UTF-8, for the thread that writes them. */
export async function* renderedPages(...args: Parameters<typeof pageTexts>): AsyncGenerator<RenderedPage> {
  for await (const page of pageTexts(...args)) yield { bytes: Buffer.from(page.text), rows: page.rows };
}
