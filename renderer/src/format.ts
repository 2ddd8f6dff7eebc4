/** Small display helpers shared by the screens. */

export function percent(confidence: number): string {
  return `${Math.round(confidence * 100)}%`;
}

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

export function dateTime(iso: string | null): string {
  if (!iso) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return iso;
  return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' });
}

export function labelText(label: string): string {
  return label.replace(/_detected$/, '').replace(/_/g, ' ');
}

export function bytes(size: number | null): string {
  if (size === null) return '—';
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${(size / 1024).toFixed(1)} KB`;
  return `${(size / 1024 / 1024).toFixed(1)} MB`;
}

/** Saves a blob as a file through a temporary link (works in browsers and in Electron). */
export function saveBlob(blob: Blob, fileName: string): void {
  const url = URL.createObjectURL(blob);
  const link = document.createElement('a');
  link.href = url;
  link.download = fileName;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

export function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
