/**
 * DICOM dates are YYYYMMDD, shown as YYYY-MM-DD. Older files write YYYY.MM.DD (ACR-NEMA; PS3.5
 * 6.2, DA, asks readers to accept it) and some writers YYYY-MM-DD or YYYY/MM/DD: all read the
 * same. Anything else is shown as found but marked, so a reader never takes it for a date.
 */
export function dicomDate(value: string | null): string {
  const text = value?.trim() ?? '';
  if (!text) return '—';
  const date = readDicomDate(text);
  return date ? `${date.year}-${date.month}-${date.day}` : `${text} (not a date)`;
}

/** A key that sorts dates in time order whichever of those forms they were written in. */
export function dicomDateKey(value: string | null): string {
  const text = value?.trim() ?? '';
  const date = readDicomDate(text);
  return date ? `${date.year}${date.month}${date.day}` : text;
}

function readDicomDate(text: string): { year: string; month: string; day: string } | null {
  const [, year, , month, day] = /^(\d{4})([.\-/]?)(\d{2})\2(\d{2})$/.exec(text) ?? [];
  if (!year || !month || !day) return null;
  return Number(month) >= 1 && Number(month) <= 12 && Number(day) >= 1 && Number(day) <= 31 ? { year, month, day } : null;
}
