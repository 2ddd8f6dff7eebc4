/** Small display helpers shared by the screens. */

export function percent(confidence: number): string {
  return `${Math.round(confidence * 100)}%`;
}

// DOM-free, so unit tests can import it (format.ts also saves files through the DOM).
export { dicomDate } from './dicom-date.ts';

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
