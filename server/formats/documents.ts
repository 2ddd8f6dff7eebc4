/** Whole documents in each format from a list of records and one serializer. */
import type { ResourceSerializer } from '#server/formats/serializers.ts';
import { csvHeader } from '#server/formats/csv.ts';
import type { XmlValue } from '#server/formats/xml.ts';
import { toXmlDocument } from '#server/formats/xml.ts';

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
  const itemNames = { ...serializer.xmlItemNames, [serializer.collection]: serializer.item };
  const value = { ...head, [serializer.collection]: items as unknown as XmlValue, ...tail };
  return toXmlDocument(rootName, value, itemNames);
}
