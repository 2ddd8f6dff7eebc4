/** SQL for export records (the files themselves live in <data>/exports). */
import type { ExportFormat } from '#common/vocabulary.ts';
import type { Database } from '#server/store/database.ts';
import { toPage, type Page, type PageRequest } from '#server/store/page.ts';

export type ExportRow = {
  id: number;
  public_id: string;
  created_by: number;
  format: ExportFormat;
  filters: string;
  deidentified: 0 | 1;
  status: 'ready' | 'failed';
  row_count: number;
  file_name: string | null;
  size_bytes: number | null;
  sha256: string | null;
  error: string | null;
  created_at: string;
  creator_public_id: string;
};

const EXPORT_SELECT = `SELECT e.*, u.public_id AS creator_public_id FROM exports e JOIN users u ON u.id = e.created_by`;

export async function insertExport(
  db: Database,
  input: {
    publicId: string;
    createdBy: number;
    format: ExportFormat;
    filters: string;
    deidentified: boolean;
    rowCount: number;
    fileName: string;
    sizeBytes: number;
    sha256: string;
    at: string;
  },
): Promise<void> {
  (await db.run(`INSERT INTO exports (public_id, created_by, format, filters, deidentified, status, row_count, file_name,
       size_bytes, sha256, created_at) VALUES (?, ?, ?, ?, ?, 'ready', ?, ?, ?, ?, ?)`, [input.publicId, input.createdBy, input.format, input.filters, input.deidentified ? 1 : 0, input.rowCount, input.fileName, input.sizeBytes, input.sha256, input.at]));
}

export async function findExport(db: Database, publicId: string): Promise<ExportRow | undefined> {
  return (await db.get(`${EXPORT_SELECT} WHERE e.public_id = ?`, [publicId])) as ExportRow | undefined;
}

export async function listExports(db: Database, filter: { createdBy?: number | undefined }, page: PageRequest): Promise<Page<ExportRow>> {
  const rows = (await db.all(`${EXPORT_SELECT} WHERE e.id > @after AND (CAST(@createdBy AS BIGINT) IS NULL OR e.created_by = @createdBy)
       ORDER BY e.id LIMIT @limit`, { after: page.afterId, createdBy: filter.createdBy ?? null, limit: page.limit + 1 })) as ExportRow[];
  return toPage(rows, page.limit);
}
