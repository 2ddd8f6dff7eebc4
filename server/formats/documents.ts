/** Whole documents in each format from a list of records and one serializer. */
import type { ResourceSerializer } from '#server/formats/serializers.ts';
import { csvHeader } from '#server/formats/csv.ts';
import type { XmlValue } from '#server/formats/xml.ts';
import { xmlDocumentAround, xmlElement } from '#server/formats/xml.ts';

export function csvDocument<T>(serializer: ResourceSerializer<T>, items: readonly T[]): string {
  return csvHeader(serializer.columns) + csvRecords(serializer, items);
}

/** The items' lines without the header: what a page of an export holds. */
export function csvRecords<T>(serializer: ResourceSerializer<T>, items: readonly T[]): string {
  let out = '';
  for (const item of items) out += serializer.csvLines(item);
  return out;
}

/** `head` holds document-level fields (an envelope's status and meta, or an export's header),
 * written before the collection. */
export function xmlDocument<T>(
  rootName: string,
  head: Readonly<Record<string, XmlValue>>,
  serializer: ResourceSerializer<T>,
  items: readonly T[],
  tail: Readonly<Record<string, XmlValue>> = {},
): string {
  const [before, after] = xmlDocumentAround(rootName, head, tail, xmlItemNames(serializer));
  return before + xmlCollection(serializer, items) + after;
}

/** The collection element of xmlDocument alone: a kept page's XML, written once. */
export function xmlCollection<T>(serializer: ResourceSerializer<T>, items: readonly T[]): string {
  return xmlElement(serializer.collection, items as unknown as XmlValue, xmlItemNames(serializer));
}

/** The text of xmlDocument before and after the collection element xmlCollection writes. */
export function xmlAroundCollection<T>(
  rootName: string,
  head: Readonly<Record<string, XmlValue>>,
  serializer: ResourceSerializer<T>,
  tail: Readonly<Record<string, XmlValue>> = {},
): [before: string, after: string] {
  return xmlDocumentAround(rootName, head, tail, xmlItemNames(serializer));
}

function xmlItemNames<T>(serializer: ResourceSerializer<T>): Readonly<Record<string, string>> {
  return { ...serializer.xmlItemNames, [serializer.collection]: serializer.item };
}
