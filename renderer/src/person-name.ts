/**
 * A DICOM PN value (PS3.5 6.2.1: family^given^middle^prefix^suffix, "=" before ideographic and
 * phonetic forms) as a reader expects it: "FAMILY, Given Middle", the alphabetic form only.
 */
export function personName(pn: string): string {
  const [alphabetic = ''] = pn.split('=');
  const [family = '', given = '', middle = '', prefix = '', suffix = ''] = alphabetic.split('^').map((part) => part.trim());
  const first = [prefix, given, middle].filter(Boolean).join(' ');
  const name = [family, first].filter(Boolean).join(', ');
  return [name, suffix].filter(Boolean).join(' ');
}
