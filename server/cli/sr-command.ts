/**
 * `mia sr analysis ANALYSIS_ID --out FILE` and `mia sr report REPORT_ID --out FILE`: an AI result
 * or a signed report as a DICOM SR file, the same bytes GET /v1/analyses/{id}/sr and
 * GET /v1/reports/{id}/sr give. The file is written beside its target and renamed into place, so
 * a reader of FILE never sees half of it.
 */
import { rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { recordAudit } from '#server/audit/audit.ts';
import { systemClock } from '#server/clock.ts';
import { resolveConfig } from '#server/config.ts';
import { openDataFolder } from '#server/data-folder.ts';
import { writeAnalysisSr, writeReportSr } from '#server/dicom-sr/structured-reports.ts';
import { MiaError } from '#server/errors.ts';

export type SrCommandIo = { out(line: string): void; err(line: string): void };

export async function srCommand(
  sub: string | undefined,
  args: readonly string[],
  out: string | undefined,
  place: { dataDir: string; databaseUrl: string | null },
  io: SrCommandIo,
): Promise<number> {
  if (sub !== 'analysis' && sub !== 'report') throw new MiaError('invalid', 'sr: expected analysis ID or report ID');
  const [id, ...extra] = args;
  if (id === undefined || extra.length > 0) throw new MiaError('invalid', `sr ${sub}: expected exactly one ${sub} id`);
  if (out === undefined || out === '') throw new MiaError('invalid', `sr ${sub}: --out FILE is required`);
  const folder = await openDataFolder(place.dataDir, { databaseUrl: place.databaseUrl });
  try {
    const deps = { db: folder.db, clock: systemClock, dataDir: place.dataDir, config: resolveConfig({ dataDir: place.dataDir }) };
    const sr = sub === 'analysis' ? await writeAnalysisSr(deps, id) : await writeReportSr(deps, id);
    const partial = join(dirname(out), `.${sr.fileName}.${process.pid}.partial`);
    try {
      await writeFile(partial, sr.bytes);
      await rename(partial, out);
    } finally {
      await rm(partial, { force: true });
    }
    await recordAudit(folder.db, {
      at: systemClock.now().toISOString(),
      request_id: null,
      key_id: 'cli',
      user_id: 'cli',
      action: sub === 'analysis' ? 'analyses.sr' : 'reports.sr',
      target: `${sub}:${id} sr:${sr.sopInstanceUid}`,
      patient_id: sr.patientId,
      outcome: 'success',
      status_code: null,
    });
    for (const note of sr.notes) io.err(`mia: note: ${note}`);
    io.out(`${out}: SOP Instance UID ${sr.sopInstanceUid} (${sr.bytes.length} bytes)`);
    return 0;
  } finally {
    await folder.close();
  }
}
