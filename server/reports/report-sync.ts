/**
 * Reports, their addenda and reader-drawn findings as sync carries them (docs/sync.md, Reports).
 *
 * - Draft fields the reader writes (impression, their own recommendation) are last-writer-wins
 *   per field by HLC. What a draft derives (its findings snapshot, a recommendation built from
 *   verdicts) is derived again where it is read, so it does not travel.
 * - Finalizing is a one-way latch and carries the signed body whole (texts, findings snapshot,
 *   and the timestamps of the field values it signed).
 * - A draft edit that would have won but reaches a signed report is never applied: it is shown as
 *   a conflict with the report, on every replica (the one that made it too). Conflicts are derived
 *   from the report's whole history of writes, so the order things arrived in does not matter.
 * - Two finalizations made apart: the earlier (by HLC, the same everywhere) is the report, the
 *   other becomes an addendum by its signer, so no signed text is lost.
 * - Addenda and reader-drawn findings are append-only and travel under the ids they were made with.
 */
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { accepted, findingPlace, isoTime, payloadProblem, publicId, refused, uid, waiting, type ApplyOutcome } from '#server/sync/change-fields.ts';
import { waitKey } from '#server/sync/wait-keys.ts';
import { reportFinalized, reviewChanged } from '#server/scans/lifecycle.ts';
import type { Database } from '#server/store/database.ts';
import { findScan } from '#server/store/scans.ts';
import { insertReaderFinding } from '#server/store/analyses.ts';
import { findReport, insertAddendum } from '#server/store/reports.ts';
import {
  addendumExists,
  findAnalysisRef,
  findAnalysisScan,
  deleteReportConflicts,
  findingExists,
  findReportForSync,
  insertReportConflict,
  insertReportWrite,
  insertSyncedReport,
  listReportWrites,
  setDraftFieldIfNewer,
  setSignedBody,
  stampReportFields,
  stampReportFinal,
  type ReportSyncRow,
} from '#server/store/report-sync.ts';
import { findUserById, findUserByPublicId } from '#server/store/users.ts';
import { recordChanges, type Replica } from '#server/sync/replica.ts';
import { formatHlc, parseHlc } from '#server/sync/hlc.ts';
import { uuid7 } from '#server/sync/uuid7.ts';


const text = z.string().max(100_000);
const hlcText = z.string().min(1).max(100);
const basis = z.enum(['model', 'verdicts', 'reader']);

export const reportPayload = z.object({
  scan_id: uid,
  analysis_id: publicId('ana').nullable(),
  author_id: publicId('usr'),
  created_at: isoTime,
  fields: z.object({ impression: text.optional(), recommendation: z.object({ text, basis }).optional() }),
  final: z.object({
    impression: text,
    recommendation: text,
    recommendation_basis: basis,
    findings: z.array(z.unknown()).max(10_000),
    finalized_at: isoTime,
    field_hlcs: z.object({ impression: hlcText.nullable(), recommendation: hlcText.nullable() }),
  }).nullable(),
});

export const addendumPayload = z.object({
  report_id: publicId('rpt'),
  text,
  finding_changes: z.array(z.unknown()).max(10_000),
  created_at: isoTime,
});

export const readerFindingPayload = z.object({ analysis_id: publicId('ana'), ...findingPlace, created_at: isoTime });

async function publicIdOfUser(tx: Database, ref: number): Promise<string> {
  const user = await findUserById(tx, ref);
  if (!user) throw new Error(`user ${ref} missing`);
  return user.public_id;
}

/**
 * Records a local write to a report (its creation, a draft edit, its finalization) as a change,
 * in the write's transaction and after it, and stamps the fields it wrote with the change's time.
 */
export async function recordReportWrite(
  tx: Database,
  replica: Replica,
  reportId: string,
  userRef: number,
  write: { impression: boolean; recommendation: boolean; final: boolean },
): Promise<void> {
  const row = await findReport(tx, reportId);
  if (!row) throw new Error(`report ${reportId} missing`);
  const hlc = formatHlc(replica.hlc.tick());
  await stampReportFields(tx, row.id, hlc, write);
  const stamped = await findReportForSync(tx, reportId);
  const changeId = uuid7(replica.clock.now().getTime());
  if (write.final) await stampReportFinal(tx, row.id, hlc, changeId);
  const fields: z.input<typeof reportPayload>['fields'] = {};
  if (write.impression) fields.impression = row.impression;
  if (write.recommendation) fields.recommendation = { text: row.recommendation, basis: row.recommendation_basis };
  const payload: z.input<typeof reportPayload> = {
    scan_id: row.scan_id,
    analysis_id: row.analysis_public_id,
    author_id: row.author_public_id,
    created_at: row.created_at,
    fields,
    final: write.final
      ? {
          impression: row.impression,
          recommendation: row.recommendation,
          recommendation_basis: row.recommendation_basis,
          findings: JSON.parse(row.findings) as unknown[],
          finalized_at: row.finalized_at ?? row.updated_at,
          field_hlcs: { impression: stamped?.impression_hlc ?? null, recommendation: stamped?.recommendation_hlc ?? null },
        }
      : null,
  };
  const userId = await publicIdOfUser(tx, userRef);
  await insertReportWrite(tx, { change_id: changeId, report_ref: row.id, hlc, user_id: userId, fields: JSON.stringify(fields) });
  await recordChanges(tx, replica, [{ entity: 'report', key: reportId, op: 'put', userId, payload, hlc, changeId }]);
}

export async function recordAddendumWrite(tx: Database, replica: Replica, addendum: { id: string; reportId: string; authorId: string; text: string; findingChanges: unknown[]; at: string }): Promise<void> {
  const payload: z.input<typeof addendumPayload> = { report_id: addendum.reportId, text: addendum.text, finding_changes: addendum.findingChanges, created_at: addendum.at };
  await recordChanges(tx, replica, [{ entity: 'addendum', key: addendum.id, op: 'put', userId: addendum.authorId, payload }]);
}

export async function recordReaderFindingWrite(
  tx: Database,
  replica: Replica,
  f: { id: string; analysisId: string; userRef: number; at: string; label: string; x: number; y: number; width: number; height: number; instanceUid: string; frame: number },
): Promise<void> {
  const payload: z.input<typeof readerFindingPayload> = { analysis_id: f.analysisId, label: f.label, x: f.x, y: f.y, width: f.width, height: f.height, instance_uid: f.instanceUid, frame: f.frame, created_at: f.at };
  await recordChanges(tx, replica, [{ entity: 'finding', key: f.id, op: 'put', userId: await publicIdOfUser(tx, f.userRef), payload }]);
}

export type IncomingChange = { change_id: string; key: string; hlc: string; user_id: string | null; payload: unknown };

/** A report change from another replica, in the caller's transaction. */
export async function applyReportChange(tx: Database, change: IncomingChange, at: string): Promise<ApplyOutcome> {
  const parsed = reportPayload.safeParse(change.payload);
  if (!parsed.success) return payloadProblem('report', parsed.error);
  if (!/^rpt_[0-9a-f]{24}$/.test(change.key)) return refused('report key: a rpt_ id');
  const p = parsed.data;
  // Everything the change names is checked before anything is written: a change that must wait
  // leaves no part of itself behind.
  if (p.final) {
    if (change.user_id === null) return refused('a finalization names its signer');
    if (!(await findUserByPublicId(tx, change.user_id))) return waiting(`the signer ${change.user_id} is not known here yet`, null);
  }
  let row = await findReportForSync(tx, change.key);
  if (!row) {
    const scan = await findScan(tx, p.scan_id);
    if (!scan) return waiting(`series ${p.scan_id} is not here yet: its instances come first`, waitKey.series(p.scan_id));
    const analysisRef = p.analysis_id === null ? null : await findAnalysisRef(tx, p.analysis_id);
    if (analysisRef === undefined) return waiting(`analysis ${p.analysis_id ?? ''} is not here yet`, p.analysis_id === null ? null : waitKey.analysis(p.analysis_id));
    const author = await findUserByPublicId(tx, p.author_id);
    if (!author) return waiting(`the report's author ${p.author_id} is not known here yet`, null);
    await insertSyncedReport(tx, { public_id: change.key, scan_ref: scan.id, analysis_ref: analysisRef, author_ref: author.id, created_at: p.created_at });
    row = await findReportForSync(tx, change.key);
    if (!row) throw new Error('inserted report vanished');
  }
  await insertReportWrite(tx, { change_id: change.change_id, report_ref: row.id, hlc: change.hlc, user_id: change.user_id, fields: JSON.stringify(p.fields) });
  if (p.final) {
    const outcome = await applyFinal(tx, row, change, p.final, at);
    if (outcome.status !== 'accepted') return outcome;
    row = (await findReportForSync(tx, change.key)) ?? row;
  }
  const edits: ['impression' | 'recommendation', string, string | null][] = [];
  if (p.fields.impression !== undefined) edits.push(['impression', p.fields.impression, null]);
  if (p.fields.recommendation !== undefined) edits.push(['recommendation', p.fields.recommendation.text, p.fields.recommendation.basis]);
  // Signed already: an edit is shown (as a conflict), never applied.
  if (row.status === 'draft') {
    for (const [field, value, fieldBasis] of edits) await setDraftFieldIfNewer(tx, row.id, field, value, fieldBasis, change.hlc, at);
  } else {
    await deriveConflicts(tx, row.public_id);
  }
  return accepted;
}

/**
 * A signed report's conflicts, derived from every write to it this replica holds: each edit of a
 * field newer than the value the report's body signed, with other words. Derived from the whole
 * history rather than kept as edits arrive, so every replica - whatever order the edits and the
 * signings reached it in - shows the same ones.
 */
async function deriveConflicts(tx: Database, reportId: string): Promise<void> {
  const row = await findReportForSync(tx, reportId);
  if (!row) return;
  await deleteReportConflicts(tx, row.id);
  if (row.status !== 'final') return;
  for (const w of await listReportWrites(tx, row.id)) {
    const parsed = reportPayload.shape.fields.safeParse(JSON.parse(w.fields));
    if (!parsed.success) continue;
    const written: ['impression' | 'recommendation', string | undefined][] = [['impression', parsed.data.impression], ['recommendation', parsed.data.recommendation?.text]];
    for (const [field, value] of written) {
      if (value === undefined) continue;
      const signedHlc = field === 'impression' ? row.impression_hlc : row.recommendation_hlc;
      const signed = field === 'impression' ? row.impression : row.recommendation;
      if ((signedHlc === null || w.hlc > signedHlc) && value !== signed) {
        const stamp = parseHlc(w.hlc);
        await insertReportConflict(tx, row.id, { field, value, hlc: w.hlc, user_id: w.user_id, created_at: stamp ? new Date(stamp.wall).toISOString() : '' });
      }
    }
  }
}

type SignedBody = z.output<typeof reportPayload>['final'] & object;

/** The addendum a losing finalization becomes: its id follows from the change, the same everywhere. */
const finalizationAddendumId = (changeId: string): string => `add_${createHash('sha256').update(`finalization:${changeId}`).digest('hex').slice(0, 24)}`;

const signedText = (b: { impression: string; recommendation: string; finalized_at: string }): string =>
  `Signed separately at ${b.finalized_at}, on another workstation while offline; the earlier signing is the report.\n\nImpression:\n${b.impression}\n\nRecommendation:\n${b.recommendation}`;

async function applyFinal(tx: Database, row: ReportSyncRow, change: IncomingChange, body: SignedBody, at: string): Promise<ApplyOutcome> {
  if (change.user_id === null) return refused('a finalization names its signer');
  const signer = await findUserByPublicId(tx, change.user_id);
  if (!signer) return waiting(`the signer ${change.user_id} is not known here yet`, null);
  if (row.final_change_id === change.change_id) return accepted;
  const incoming = {
    impression: body.impression,
    recommendation: body.recommendation,
    recommendation_basis: body.recommendation_basis,
    findings: JSON.stringify(body.findings),
    finalized_at: body.finalized_at,
    finalized_by: signer.id,
    hlc: change.hlc,
    change_id: change.change_id,
    impression_hlc: body.field_hlcs.impression,
    recommendation_hlc: body.field_hlcs.recommendation,
  };
  if (row.status === 'draft') {
    await setSignedBody(tx, row.id, incoming);
    // What this replica's draft held that is newer than what was signed: shown, not lost.
    await deriveConflicts(tx, row.public_id);
    const full = await findReport(tx, row.public_id);
    if (full) await reportFinalized(tx, { ref: full.scan_ref, status: full.scan_status }, row.public_id, at);
    return accepted;
  }
  // Signed twice apart: the earlier signing is the report, the later an addendum by its signer.
  const currentIsEarlier = row.final_hlc !== null && (row.final_hlc < change.hlc || (row.final_hlc === change.hlc && (row.final_change_id ?? '') < change.change_id));
  if (currentIsEarlier) {
    await addSigningAsAddendum(tx, row.id, change.change_id, signer.id, { impression: body.impression, recommendation: body.recommendation, finalized_at: body.finalized_at });
    return accepted;
  }
  if (row.final_change_id !== null && row.finalized_by !== null && row.finalized_at !== null) {
    await addSigningAsAddendum(tx, row.id, row.final_change_id, row.finalized_by, { impression: row.impression, recommendation: row.recommendation, finalized_at: row.finalized_at });
  }
  await setSignedBody(tx, row.id, incoming);
  await deriveConflicts(tx, row.public_id);
  return accepted;
}

async function addSigningAsAddendum(tx: Database, reportRef: number, changeId: string, authorRef: number, body: { impression: string; recommendation: string; finalized_at: string }): Promise<void> {
  const id = finalizationAddendumId(changeId);
  if (await addendumExists(tx, id)) return;
  await insertAddendum(tx, { reportRef, authorRef, text: signedText(body), findingChanges: '[]', at: body.finalized_at, publicId: id });
}

export async function applyAddendumChange(tx: Database, change: IncomingChange): Promise<ApplyOutcome> {
  const parsed = addendumPayload.safeParse(change.payload);
  if (!parsed.success) return payloadProblem('addendum', parsed.error);
  if (!/^add_[0-9a-f]{24}$/.test(change.key)) return refused('addendum key: an add_ id');
  if (await addendumExists(tx, change.key)) return accepted;
  const p = parsed.data;
  const report = await findReportForSync(tx, p.report_id);
  if (!report) return waiting(`report ${p.report_id} is not here yet`, waitKey.report(p.report_id));
  if (change.user_id === null) return refused('an addendum names its author');
  const author = await findUserByPublicId(tx, change.user_id);
  if (!author) return waiting(`the addendum's author ${change.user_id} is not known here yet`, null);
  await insertAddendum(tx, { reportRef: report.id, authorRef: author.id, text: p.text, findingChanges: JSON.stringify(p.finding_changes), at: p.created_at, publicId: change.key });
  return accepted;
}

export async function applyReaderFindingChange(tx: Database, change: IncomingChange, at: string): Promise<ApplyOutcome> {
  const parsed = readerFindingPayload.safeParse(change.payload);
  if (!parsed.success) return payloadProblem('finding', parsed.error);
  if (!/^fnd_[0-9a-f]{24}$/.test(change.key)) return refused('finding key: a fnd_ id');
  if (await findingExists(tx, change.key)) return accepted;
  const p = parsed.data;
  const analysisRef = await findAnalysisRef(tx, p.analysis_id);
  if (analysisRef === undefined) return waiting(`analysis ${p.analysis_id} is not here yet`, waitKey.analysis(p.analysis_id));
  if (change.user_id === null) return refused('a reader-drawn finding names its reader');
  const reader = await findUserByPublicId(tx, change.user_id);
  if (!reader) return waiting(`the finding's reader ${change.user_id} is not known here yet`, null);
  await insertReaderFinding(tx, analysisRef, { label: p.label, x: p.x, y: p.y, width: p.width, height: p.height, instanceUid: p.instance_uid, frame: p.frame }, reader.id, p.created_at, change.key);
  const scan = await findAnalysisScan(tx, analysisRef);
  if (scan?.latest) await reviewChanged(tx, { ref: scan.id, status: scan.status }, at);
  return accepted;
}
