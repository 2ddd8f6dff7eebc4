/**
 * DICOM dates are YYYYMMDD, shown as YYYY-MM-DD. Older files write YYYY.MM.DD (ACR-NEMA; PS3.5
 * 6.2, DA, asks readers to accept it) and some writers YYYY-MM-DD or YYYY/MM/DD: all read the
 * same. Anything else is shown as found but marked, so a reader never takes it for a date.
 */
export function dicomDate(value: string | null): string {
  const text = value?.trim() ?? '';
  if (!text) return '—';
  const match = /^(\d{4})([.\-/]?)(\d{2})\2(\d{2})$/.exec(text);
  const [, year, , month, day] = match ?? [];
  if (year && month && day && Number(month) >= 1 && Number(month) <= 12 && Number(day) >= 1 && Number(day) <= 31) return `${year}-${month}-${day}`;
  return `${text} (not a date)`;
}
