/**
 * XML writing for legacy consumers: a JSON-shaped value becomes elements named after its keys;
 * arrays become a wrapper element holding one element per item, named by the caller. Text is
 * escaped and characters XML 1.0 forbids (most C0 controls) are dropped, so the output is always
 * well-formed whatever a DICOM header contained.
 */
export type XmlValue = string | number | boolean | null | readonly XmlValue[] | { readonly [key: string]: XmlValue };

// C0 controls XML 1.0 forbids, its two non-characters, and UTF-16 halves without their pair
// (a lone surrogate cannot be encoded as UTF-8 at all).
const FORBIDDEN_CHARS = /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/** Anything escapeXml changes; most values (ids, labels, numbers as text) have none of it. */
const NEEDS_ESCAPE = /[&<>"'\r\u0000-\u0008\u000B\u000C\u000E-\u001F\uD800-\uDFFF\uFFFE\uFFFF]/;

export function escapeXml(text: string): string {
  // Seven replace passes over every value were half of a results page's XML cost.
  if (!NEEDS_ESCAPE.test(text)) return text;
  return text
    .replace(FORBIDDEN_CHARS, '')
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&apos;')
    // A parser turns a literal CR (and CRLF) into LF (XML 1.0 2.11); a reference keeps it.
    .replaceAll('\r', '&#13;');
}

const XML_NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;
/** Names already checked; they are our schemas' keys, a few dozen, so the set stays small. */
const checkedNames = new Set<string>();
const MAX_CHECKED_NAMES = 1000;

/** Element names come from our own schema keys, but are checked so a bug cannot emit bad XML. */
function elementName(name: string): string {
  if (checkedNames.has(name)) return name;
  if (!XML_NAME.test(name)) throw new Error(`not an XML element name: ${name}`);
  if (checkedNames.size < MAX_CHECKED_NAMES) checkedNames.add(name);
  return name;
}

/** Appends the element to `out` (one growing string: V8 joins appended pieces lazily, where
 * building arrays of children and joining them at every level cost a page of results 8x its JSON). */
function appendElement(out: string, name: string, value: XmlValue, itemNames: Readonly<Record<string, string>>): string {
  const tag = elementName(name);
  if (value === null) return `${out}<${tag}/>`;
  if (typeof value === 'string') return `${out}<${tag}>${escapeXml(value)}</${tag}>`;
  if (typeof value === 'number' || typeof value === 'boolean') return `${out}<${tag}>${String(value)}</${tag}>`;
  out += `<${tag}>`;
  if (Array.isArray(value)) {
    const itemName = itemNames[name] ?? 'item';
    for (const item of value as readonly XmlValue[]) out = appendElement(out, itemName, item, itemNames);
  } else {
    out = appendChildren(out, value as { readonly [key: string]: XmlValue | undefined }, itemNames);
  }
  return `${out}</${tag}>`;
}

function appendChildren(out: string, record: { readonly [key: string]: XmlValue | undefined }, itemNames: Readonly<Record<string, string>>): string {
  for (const key of Object.keys(record)) {
    const child = record[key];
    // An absent optional field is left out, as JSON.stringify leaves it out.
    if (child !== undefined) out = appendElement(out, key, child, itemNames);
  }
  return out;
}

export function xmlElement(name: string, value: XmlValue, itemNames: Readonly<Record<string, string>>): string {
  return appendElement('', name, value, itemNames);
}

export function toXmlDocument(rootName: string, value: XmlValue, itemNames: Readonly<Record<string, string>>): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n${xmlElement(rootName, value, itemNames)}\n`;
}

/**
 * The text of toXmlDocument(rootName, { ...before, [name]: ..., ...after }) before and after the
 * element between: a page's collection is written once and kept while the envelope around it
 * changes with every request (server/http/shared-answers.ts).
 */
export function xmlDocumentAround(
  rootName: string,
  before: Readonly<Record<string, XmlValue>>,
  after: Readonly<Record<string, XmlValue>>,
  itemNames: Readonly<Record<string, string>>,
): [before: string, after: string] {
  const tag = elementName(rootName);
  const head = appendChildren(`<?xml version="1.0" encoding="UTF-8"?>\n<${tag}>`, before, itemNames);
  return [head, `${appendChildren('', after, itemNames)}</${tag}>\n`];
}
