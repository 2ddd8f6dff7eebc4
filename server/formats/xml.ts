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

export function escapeXml(text: string): string {
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

/** Element names come from our own schema keys, but are checked so a bug cannot emit bad XML. */
function elementName(name: string): string {
  if (!/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(name)) throw new Error(`not an XML element name: ${name}`);
  return name;
}

export function xmlElement(name: string, value: XmlValue, itemNames: Readonly<Record<string, string>>): string {
  const tag = elementName(name);
  if (value === null) return `<${tag}/>`;
  if (Array.isArray(value)) {
    const itemName = itemNames[name] ?? 'item';
    return `<${tag}>${value.map((item: XmlValue) => xmlElement(itemName, item, itemNames)).join('')}</${tag}>`;
  }
  if (typeof value === 'object') {
    const children = Object.entries(value as Record<string, XmlValue>)
      .map(([key, child]) => xmlElement(key, child, itemNames))
      .join('');
    return `<${tag}>${children}</${tag}>`;
  }
  return `<${tag}>${escapeXml(String(value))}</${tag}>`;
}

export function toXmlDocument(rootName: string, value: XmlValue, itemNames: Readonly<Record<string, string>>): string {
  return `<?xml version="1.0" encoding="UTF-8"?>\n${xmlElement(rootName, value, itemNames)}\n`;
}
