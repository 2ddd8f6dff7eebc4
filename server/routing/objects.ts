/**
 * The bytes a send job sends. An SR is written again at each attempt instead of kept: its writer
 * is deterministic (same analysis or report, same bytes), so a retry sends exactly what the first
 * attempt would have, and nothing extra is stored. A stored instance is read from the archive.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { MiaError, notFound } from '#server/errors.ts';
import type { Services } from '#server/services.ts';
import { findInstance } from '#server/store/instances.ts';
import type { ObjectKind } from '#server/store/routing.ts';
import type { ObjectSource } from '#server/routing/send-worker.ts';

/** An SR writer as server/dicom-sr offers it: the Part 10 bytes of an analysis's or report's SR. */
export type SrWriter = (services: Services, publicId: string) => Promise<{ bytes: Uint8Array }>;

export type SrWriters = { analysis: SrWriter | null; report: SrWriter | null };

export function objectSource(writers: SrWriters): ObjectSource {
  return async (services: Services, kind: ObjectKind, subject: string): Promise<Buffer> => {
    if (kind === 'instance') {
      const row = await findInstance(services.db, subject);
      if (!row) throw notFound('Instance', subject);
      return await readFile(join(services.dataDir, row.file_path));
    }
    const writer = kind === 'analysis_sr' ? writers.analysis : writers.report;
    if (!writer) throw new MiaError('internal', 'This mia cannot write DICOM SR yet', `no writer for ${kind}`);
    const written = await writer(services, subject);
    return Buffer.from(written.bytes.buffer, written.bytes.byteOffset, written.bytes.byteLength);
  };
}
