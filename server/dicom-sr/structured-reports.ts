/**
 * AI results and signed reports as DICOM SR files (issue 14, item 4): what routing sends, DICOMweb
 * serves and the API and CLI download. Both are written on demand from what is stored, never
 * from the wall clock, so writing the same analysis or report twice gives the same bytes. UIDs are
 * derived (hashed-uid.ts): the SOP Instance UID from the record's id and the digest of the
 * document's content, so a verdict or an addendum makes a new instance while an unchanged record
 * keeps its UID; one SR series per study for AI results and one for reports.
 */
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ServerConfig } from '#server/config.ts';
import { readDicom } from '#server/dicom/parse.ts';
import { textProblem } from '#server/dicom/write/data-set-writer.ts';
import { hashedUid } from '#server/dicom/write/hashed-uid.ts';
import { dicomDateTime, type SopReference } from '#server/dicom-sr/content-items.ts';
import { labelCoder } from '#server/dicom-sr/label-codes.ts';
import { measurementReportTree, type Person, type ReportedFinding } from '#server/dicom-sr/measurement-report.ts';
import { copiedAttributes } from '#server/dicom-sr/patient-study.ts';
import { reportTree, type SignedAddendum } from '#server/dicom-sr/report-document.ts';
import { SOP_CLASS, writeSrFile, type EvidenceInstance, type SrDocument } from '#server/dicom-sr/sr-document.ts';
import { conflict, MiaError, notFound } from '#server/errors.ts';
import { getReport } from '#server/reports/reports.ts';
import { findFindingsByAnalyses, type FindingRow } from '#server/store/analyses.ts';
import { findAnalysisJob } from '#server/store/analysis-jobs.ts';
import type { Clock } from '#server/clock.ts';
import type { Database } from '#server/store/database.ts';
import { findReport } from '#server/store/reports.ts';
import {
  findPeople,
  findScanStudy,
  findStoredInstances,
  listStoredInstancesOfScan,
  type PersonRow,
  type StoredInstanceRow,
} from '#server/store/structured-report-sources.ts';
import { findUserByPublicId } from '#server/store/users.ts';

export type SrDeps = { db: Database; clock: Clock; dataDir: string; config: Pick<ServerConfig, 'modelsDirs' | 'dataDir'> };

export type WrittenSr = {
  bytes: Uint8Array;
  sopClassUid: string;
  sopInstanceUid: string;
  studyUid: string;
  seriesUid: string;
  fileName: string;
  /** The patient's id in the archive index, for the audit trail. */
  patientId: string;
  /** Source values left out because they did not fit (named, never quoted: they may be PHI). */
  notes: string[];
};

/** Series numbers of mia's SR series: high, to sort after the acquired series in a viewer. */
const AI_SERIES_NUMBER = 990;
const REPORT_SERIES_NUMBER = 991;

/** Text for UT and LT: DICOM line breaks (CR LF), no tabs or other control characters. */
function plainText(value: string): string {
  return value.replace(/\r\n|\r|\n/g, '\r\n').replace(/\t/g, ' ').replace(/[\0-\x08\x0b\x0c\x0e-\x1f\x7f]/g, '');
}

/** A person as an SR names them: their name if it is a valid PN, else their login (email). */
function personOf(row: PersonRow | undefined): Person | null {
  if (!row) return null;
  const name = [row.name, row.email].find((n): n is string => n !== null && n.trim() !== '' && textProblem('PN', n) === null) ?? 'unknown';
  return { name, login: row.email };
}

async function sopClassOf(dataDir: string, row: StoredInstanceRow): Promise<string> {
  if (row.sop_class_uid) return row.sop_class_uid;
  // Instances indexed before the SOP class was kept: read it from the file once.
  const parsed = await readDicom(new Uint8Array(await readFile(join(dataDir, row.file_path))));
  if (!parsed.ok) throw conflict('A referenced image cannot be read', `instance ${row.sop_instance_uid}: ${parsed.reason}`);
  return parsed.instance.sopClassUid;
}

/** Writes the document twice: first to digest its content, then with the UID that digest gives. */
function finish(doc: Omit<SrDocument, 'sopInstanceUid'>, recordKind: string, recordId: string): { bytes: Uint8Array; sopInstanceUid: string } {
  const draft = writeSrFile({ ...doc, sopInstanceUid: '1.2' });
  const digest = createHash('sha256').update(draft).digest('hex');
  const sopInstanceUid = hashedUid(recordKind, recordId, digest);
  return { bytes: writeSrFile({ ...doc, sopInstanceUid }), sopInstanceUid };
}

type ScanSources = {
  evidence: EvidenceInstance[];
  references: Map<string, { sopClassUid: string; frames: number }>;
  copied: Awaited<ReturnType<typeof copiedAttributes>>;
  modality: string;
  patientId: string;
};

/** The scan's study, its instances as evidence, and the instances `uids` name, all stored here. */
async function scanSources(deps: SrDeps, scanRef: number, uids: readonly string[]): Promise<ScanSources> {
  const study = await findScanStudy(deps.db, scanRef);
  if (!study) throw new MiaError('internal', 'scan of a stored record is missing');
  const series = await listStoredInstancesOfScan(deps.db, scanRef);
  const referenced = await findStoredInstances(deps.db, [...new Set(uids)]);
  const missing = [...new Set(uids)].filter((uid) => !referenced.some((r) => r.sop_instance_uid === uid));
  if (missing.length > 0) {
    throw conflict('An image a finding is on is not stored here', `instance ${missing[0]} is not in this archive (a workstation that has not fetched the study); an SR must reference stored images`);
  }
  const references = new Map<string, { sopClassUid: string; frames: number }>();
  for (const r of referenced) references.set(r.sop_instance_uid, { sopClassUid: await sopClassOf(deps.dataDir, r), frames: r.frames });
  const evidence: EvidenceInstance[] = [];
  for (const r of series) {
    evidence.push({ studyUid: r.study_uid, seriesUid: r.series_uid, sopClassUid: references.get(r.sop_instance_uid)?.sopClassUid ?? (await sopClassOf(deps.dataDir, r)), sopInstanceUid: r.sop_instance_uid });
  }
  const sample = referenced[0] ?? series[0] ?? null;
  return { evidence, references, copied: await copiedAttributes(deps.dataDir, study, sample?.file_path ?? null), modality: study.modality, patientId: study.patient_id };
}

function imageRef(references: ScanSources['references'], uid: string, frame: number): SopReference {
  const ref = references.get(uid);
  if (!ref) throw new MiaError('internal', 'reference resolved above');
  // A frame number only for multi-frame images (PS3.3 C.17.3.2.1); mia counts frames from 0.
  return { sopClassUid: ref.sopClassUid, sopInstanceUid: uid, ...(ref.frames > 1 ? { frame: frame + 1 } : {}) };
}

/** Findings in an order every replica agrees on: the model's by confidence, then readers'. */
function stableOrder(rows: readonly FindingRow[]): FindingRow[] {
  return [...rows].sort((a, b) => Number(a.source === 'reader') - Number(b.source === 'reader') || b.confidence - a.confidence || (a.public_id < b.public_id ? -1 : a.public_id > b.public_id ? 1 : 0));
}

/** A succeeded analysis as a TID 1500 Measurement Report (Comprehensive SR). */
export async function writeAnalysisSr(deps: SrDeps, analysisId: string): Promise<WrittenSr> {
  const row = await findAnalysisJob(deps.db, analysisId);
  if (!row) throw notFound('Analysis', analysisId);
  if (row.status !== 'succeeded' || row.finished_at === null) {
    throw conflict('This analysis has no result to write', `its status is ${row.status}; an SR is written for a succeeded analysis`);
  }
  const findings = stableOrder((await findFindingsByAnalyses(deps.db, [row.id])).get(row.id) ?? []);
  const sources = await scanSources(deps, row.scan_ref, findings.map((f) => f.instance_uid));
  const people = await findPeople(deps.db, findings.flatMap((f) => [f.reviewed_by, f.created_by]).filter((id): id is number => id !== null));
  const codeOf = await labelCoder(deps.config, row.model_id);
  const reported: ReportedFinding[] = findings.map((f) => ({
    id: f.public_id,
    label: f.label,
    code: codeOf(f.label),
    source: f.source,
    confidence: f.confidence,
    box: { x: f.x, y: f.y, width: f.width, height: f.height },
    localization: f.localization,
    image: imageRef(sources.references, f.instance_uid, f.frame),
    author: f.source === 'reader' ? personOf(people.get(f.created_by ?? -1)) : null,
    review: f.review === null ? null : { verdict: f.review, by: personOf(people.get(f.reviewed_by ?? -1)), at: f.reviewed_at ? dicomDateTime(f.reviewed_at) : null, reason: f.review_reason ? plainText(f.review_reason) : null },
  }));
  const images = [...sources.references.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([uid, r]) => ({ sopClassUid: r.sopClassUid, sopInstanceUid: uid }));
  const root = measurementReportTree({
    model: { id: row.model_id, name: row.model_name, version: row.model_version, sha256: row.model_sha256 },
    thresholds: JSON.parse(row.thresholds) as Record<string, number>,
    modality: sources.modality,
    findings: reported,
    images,
  });
  // The instance's content is as of its latest verdict; the observation is the analysis's.
  const latest = [row.finished_at, ...findings.map((f) => f.reviewed_at)].filter((t): t is string => t !== null).sort().at(-1) ?? row.finished_at;
  const studyUid = sources.copied.patientStudy.studyUid;
  const seriesUid = hashedUid('mia ai results series', studyUid);
  const { bytes, sopInstanceUid } = finish(
    {
      sopClassUid: SOP_CLASS.comprehensiveSr,
      seriesUid,
      seriesNumber: AI_SERIES_NUMBER,
      seriesDescription: 'mia AI results',
      instanceNumber: 1,
      patientStudy: sources.copied.patientStudy,
      contentAt: row.finished_at,
      createdAt: latest,
      completion: 'COMPLETE',
      verification: { flag: 'UNVERIFIED' },
      evidence: sources.evidence,
      otherEvidence: [],
      root,
    },
    'mia analysis sr',
    row.public_id,
  );
  return { bytes, sopClassUid: SOP_CLASS.comprehensiveSr, sopInstanceUid, studyUid, seriesUid, fileName: `${row.public_id}.dcm`, patientId: sources.patientId, notes: sources.copied.notes };
}

const VERDICT_WORDS = { accepted: 'accepted', rejected: 'rejected' } as const;

/** A final (signed) report, with its addenda, as a Basic Text SR. */
export async function writeReportSr(deps: SrDeps, reportId: string): Promise<WrittenSr> {
  const row = await findReport(deps.db, reportId);
  if (!row) throw notFound('Report', reportId);
  if (row.status !== 'final' || row.finalized_at === null || row.finalized_by === null) {
    throw conflict('This report is not signed', 'an SR is written for a final report; finalize it first (PATCH /v1/reports/{id} with status final)');
  }
  const report = await getReport(deps, reportId);
  const aiResult = row.analysis_public_id === null ? null : await writeAnalysisSr(deps, row.analysis_public_id).catch((error: unknown) => {
    // A report whose analysis cannot be written (its images gone) still stands on its own.
    if (error instanceof MiaError && error.kind === 'conflict') return null;
    throw error;
  });
  const sources = await scanSources(deps, row.scan_ref, report.findings.map((f) => f.instance_uid));
  const codeOf = await labelCoder(deps.config, row.model_id ?? '');
  const addendumAuthors = await Promise.all(report.addenda.map(async (a) => await findUserByPublicId(deps.db, a.author.id)));
  const people = await findPeople(deps.db, [row.author_ref, row.finalized_by, ...addendumAuthors.flatMap((u) => (u ? [u.id] : []))]);
  const author = personOf(people.get(row.author_ref)) ?? { name: 'unknown', login: report.author.email };
  const signer = personOf(people.get(row.finalized_by)) ?? author;
  const addenda: SignedAddendum[] = report.addenda.map((a, i) => ({
    author: personOf(people.get(addendumAuthors[i]?.id ?? -1)) ?? { name: 'unknown', login: a.author.email },
    at: dicomDateTime(a.created_at),
    text: plainText(a.text),
    changes: a.finding_changes.map((c) => `${codeOf(c.label).meaning} (${c.label}), finding ${c.finding_id}: ${c.added ? 'added, ' : `${c.from ?? 'not reviewed'} -> `}${c.to ?? 'not reviewed'}`),
  }));
  const findings = report.findings.map((f) => {
    const place = f.place ? `; slice ${f.place.slice ?? '?'} of ${f.place.slices ?? '?'}${f.place.width_mm !== null && f.place.height_mm !== null ? `; ${f.place.width_mm.toFixed(1)} x ${f.place.height_mm.toFixed(1)} mm` : ''}` : '';
    const confidence = f.source === 'reader' ? 'drawn by the reader' : `confidence ${f.confidence.toFixed(2)}`;
    const verdict = f.review ? VERDICT_WORDS[f.review] : 'not reviewed';
    // A classifier's finding has no size: the line says it is about the whole image.
    const whole = f.localization === 'image' ? '; whole image, no location' : '';
    return { line: `${codeOf(f.label).meaning} (${f.label}): ${verdict}; ${confidence}${place}${whole}`, image: imageRef(sources.references, f.instance_uid, f.frame) };
  });
  const aiRef = aiResult ? { sopClassUid: aiResult.sopClassUid, sopInstanceUid: aiResult.sopInstanceUid } : null;
  const root = reportTree({ author, findings, aiResult: aiRef, impression: plainText(report.impression), recommendation: plainText(report.recommendation), addenda });
  const lastWritten = [row.finalized_at, ...report.addenda.map((a) => a.created_at)].sort().at(-1) ?? row.finalized_at;
  const studyUid = sources.copied.patientStudy.studyUid;
  const seriesUid = hashedUid('mia reports series', studyUid);
  const { bytes, sopInstanceUid } = finish(
    {
      sopClassUid: SOP_CLASS.basicTextSr,
      seriesUid,
      seriesNumber: REPORT_SERIES_NUMBER,
      seriesDescription: 'mia reports',
      instanceNumber: 1,
      patientStudy: sources.copied.patientStudy,
      contentAt: row.finalized_at,
      createdAt: lastWritten,
      completion: 'COMPLETE',
      verification: {
        flag: 'VERIFIED',
        observers: [{ name: signer.name, at: row.finalized_at }, ...addenda.map((a, i) => ({ name: a.author.name, at: report.addenda[i]?.created_at ?? row.finalized_at ?? '' }))],
      },
      evidence: sources.evidence,
      otherEvidence: aiResult ? [{ studyUid: aiResult.studyUid, seriesUid: aiResult.seriesUid, sopClassUid: aiResult.sopClassUid, sopInstanceUid: aiResult.sopInstanceUid }] : [],
      root,
    },
    'mia report sr',
    row.public_id,
  );
  return { bytes, sopClassUid: SOP_CLASS.basicTextSr, sopInstanceUid, studyUid, seriesUid, fileName: `${row.public_id}.dcm`, patientId: sources.patientId, notes: [...sources.copied.notes, ...(aiResult?.notes ?? [])] };
}
