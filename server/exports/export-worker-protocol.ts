/** Messages between an export (parallel-export.ts) and its worker threads (export-worker.ts). */
import type { ExportFormat } from '#common/vocabulary.ts';
import type { ExportFilters } from '#server/api/schemas.ts';

export type ExportWorkerData = {
  dataDir: string;
  nativeBinding: string | undefined;
  format: ExportFormat;
  filters: ExportFilters;
  /** The pseudonym key (hex) of a de-identified export; null for one that is not. */
  pseudonymSecret: string | null;
};

/** Render the scans after `afterId` through `throughId`; take back a range's memory once written. */
export type ToExportWorker = { type: 'range'; id: number; afterId: number; throughId: number } | { type: 'reuse'; buffer: ArrayBuffer } | { type: 'close' };

export type FromExportWorker =
  | { type: 'ready' }
  /** The range's pages joined (with the format's `between`) as UTF-8, at the start of a transferred buffer, and the results they hold. */
  | { type: 'range'; id: number; bytes: Uint8Array; rows: number }
  | { type: 'error'; id: number; message: string; code: string | undefined }
  | { type: 'closed' };
