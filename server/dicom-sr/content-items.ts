/**
 * SR content items (PS3.3 C.17.3, SR Document Content Module) as plain values, and their
 * encoding into data set elements: each item names its value type, concept and children, and
 * children carry their relationship to the parent. Document builders (measurement-report.ts,
 * report-document.ts) compose trees of these; sr-document.ts wraps a tree in the document modules.
 */
import { numbers, sequence, tagOf, text, type DataSet, type Element } from '#server/dicom/write/data-set-writer.ts';
import { formatDecimal } from '#server/dicom/write/data-set-writer.ts';

/** A coded concept (PS3.3 8.8). Code values longer than 16 characters go in Long Code Value. */
export type Code = { value: string; scheme: string; meaning: string };

export type Relationship = 'CONTAINS' | 'HAS OBS CONTEXT' | 'HAS CONCEPT MOD' | 'HAS PROPERTIES' | 'HAS ACQ CONTEXT' | 'INFERRED FROM' | 'SELECTED FROM';

/** An instance referenced by an IMAGE or COMPOSITE item; `frame` counts from 1 (multi-frame). */
export type SopReference = { sopClassUid: string; sopInstanceUid: string; frame?: number | undefined };

type Common = {
  name: Code;
  children?: readonly Child[];
  /** When the item was observed, if not at the document's Content Date/Time (0040,A032). */
  observedAt?: string | undefined;
};

export type ContentItem = Common &
  (
    | { type: 'CONTAINER'; template?: string | undefined }
    | { type: 'TEXT'; text: string }
    | { type: 'CODE'; code: Code }
    | { type: 'NUM'; value: number; unit: Code }
    | { type: 'UIDREF'; uid: string }
    | { type: 'PNAME'; person: string }
    | { type: 'DATETIME'; at: string }
    /** 2D image coordinates (column, row pairs), PS3.3 C.18.6; selected from one IMAGE child. */
    | { type: 'SCOORD'; graphicType: 'POINT' | 'MULTIPOINT' | 'POLYLINE' | 'CIRCLE' | 'ELLIPSE'; points: readonly number[] }
    | { type: 'IMAGE'; ref: SopReference }
    | { type: 'COMPOSITE'; ref: SopReference }
  );

export type Child = { relationship: Relationship; item: ContentItem };

export const child = (relationship: Relationship, item: ContentItem): Child => ({ relationship, item });

const T = {
  codeValue: tagOf(0x0008, 0x0100),
  codingSchemeDesignator: tagOf(0x0008, 0x0102),
  codeMeaning: tagOf(0x0008, 0x0104),
  longCodeValue: tagOf(0x0008, 0x0119),
  mappingResource: tagOf(0x0008, 0x0105),
  referencedSopClass: tagOf(0x0008, 0x1150),
  referencedSopInstance: tagOf(0x0008, 0x1155),
  referencedFrameNumber: tagOf(0x0008, 0x1160),
  referencedSopSequence: tagOf(0x0008, 0x1199),
  measurementUnits: tagOf(0x0040, 0x08ea),
  relationshipType: tagOf(0x0040, 0xa010),
  observationDateTime: tagOf(0x0040, 0xa032),
  valueType: tagOf(0x0040, 0xa040),
  conceptName: tagOf(0x0040, 0xa043),
  continuity: tagOf(0x0040, 0xa050),
  dateTime: tagOf(0x0040, 0xa120),
  personName: tagOf(0x0040, 0xa123),
  uid: tagOf(0x0040, 0xa124),
  textValue: tagOf(0x0040, 0xa160),
  floatingPointValue: tagOf(0x0040, 0xa161),
  conceptCode: tagOf(0x0040, 0xa168),
  measuredValue: tagOf(0x0040, 0xa300),
  numericValue: tagOf(0x0040, 0xa30a),
  contentTemplate: tagOf(0x0040, 0xa504),
  contentSequence: tagOf(0x0040, 0xa730),
  templateIdentifier: tagOf(0x0040, 0xdb00),
  graphicData: tagOf(0x0070, 0x0022),
  graphicType: tagOf(0x0070, 0x0023),
} as const;

/** Code Meaning is LO (64 characters); a longer meaning is cut, as it is only shown to people. */
export function codeItem(code: Code): DataSet {
  const long = code.value.length > 16;
  return [
    text(long ? T.longCodeValue : T.codeValue, long ? 'UC' : 'SH', code.value),
    text(T.codingSchemeDesignator, 'SH', code.scheme),
    text(T.codeMeaning, 'LO', [...code.meaning].slice(0, 64).join('')),
  ];
}

export function sopReferenceItem(ref: SopReference): DataSet {
  return [
    text(T.referencedSopClass, 'UI', ref.sopClassUid),
    text(T.referencedSopInstance, 'UI', ref.sopInstanceUid),
    ...(ref.frame === undefined ? [] : [text(T.referencedFrameNumber, 'IS', String(ref.frame))]),
  ];
}

function valueElements(item: ContentItem): Element[] {
  switch (item.type) {
    case 'CONTAINER':
      return [
        text(T.continuity, 'CS', 'SEPARATE'),
        ...(item.template === undefined ? [] : [sequence(T.contentTemplate, [[text(T.mappingResource, 'CS', 'DCMR'), text(T.templateIdentifier, 'CS', item.template)]])]),
      ];
    case 'TEXT':
      return [text(T.textValue, 'UT', item.text)];
    case 'CODE':
      return [sequence(T.conceptCode, [codeItem(item.code)])];
    case 'NUM':
      // Numeric Value (DS) holds at most 16 characters; Floating Point Value keeps the exact double.
      return [
        sequence(T.measuredValue, [
          [text(T.numericValue, 'DS', formatDecimal(item.value)), numbers(T.floatingPointValue, 'FD', item.value), sequence(T.measurementUnits, [codeItem(item.unit)])],
        ]),
      ];
    case 'UIDREF':
      return [text(T.uid, 'UI', item.uid)];
    case 'PNAME':
      return [text(T.personName, 'PN', item.person)];
    case 'DATETIME':
      return [text(T.dateTime, 'DT', item.at)];
    case 'SCOORD':
      return [numbers(T.graphicData, 'FL', item.points), text(T.graphicType, 'CS', item.graphicType)];
    case 'IMAGE':
    case 'COMPOSITE':
      return [sequence(T.referencedSopSequence, [sopReferenceItem(item.ref)])];
  }
}

/**
 * The elements of one content item: its value type, concept name and value, then its children
 * in Content Sequence. The root item (the document) has no relationship.
 */
export function encodeContentItem(item: ContentItem, relationship: Relationship | null): Element[] {
  const children = item.children ?? [];
  return [
    ...(relationship === null ? [] : [text(T.relationshipType, 'CS', relationship)]),
    text(T.valueType, 'CS', item.type),
    sequence(T.conceptName, [codeItem(item.name)]),
    ...(item.observedAt === undefined ? [] : [text(T.observationDateTime, 'DT', item.observedAt)]),
    ...valueElements(item),
    ...(children.length === 0 ? [] : [sequence(T.contentSequence, children.map((c) => encodeContentItem(c.item, c.relationship)))]),
  ];
}

/** Every coded concept in a tree, for the document's Coding Scheme Identification. */
export function codesIn(item: ContentItem): Code[] {
  const own = [item.name, ...(item.type === 'CODE' ? [item.code] : item.type === 'NUM' ? [item.unit] : [])];
  return [...own, ...(item.children ?? []).flatMap((c) => codesIn(c.item))];
}

/**
 * A DICOM DT value (YYYYMMDDHHMMSS.FFFFFF) for an ISO time, in UTC. The offset is not written in
 * each value (dcmtk 3.6's SR reader flags DT values that carry one) but once, as Timezone Offset
 * From UTC (0008,0201) +0000, which applies to every date and time of the data set (PS3.3
 * C.12.1.1.8).
 */
export function dicomDateTime(iso: string): string {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) throw new RangeError(`not a time: ${iso}`);
  const p = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${p(d.getUTCFullYear(), 4)}${p(d.getUTCMonth() + 1)}${p(d.getUTCDate())}${p(d.getUTCHours())}${p(d.getUTCMinutes())}${p(d.getUTCSeconds())}.${p(d.getUTCMilliseconds(), 3)}000`;
}

/** DA and TM values of an ISO time, in UTC. */
export function dicomDateAndTime(iso: string): { date: string; time: string } {
  const dt = dicomDateTime(iso);
  return { date: dt.slice(0, 8), time: dt.slice(8, 21) };
}
