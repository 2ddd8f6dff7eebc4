/**
 * What each synced entity carries and how a replica takes one in (docs/sync.md, What syncs):
 *
 * - instance: the file is the instance. The change names it (SOP Instance UID) and its content
 *   (SHA-256); the receiver reads the file it holds under that digest with the import's own
 *   parser and reject rules, so patients, studies and series come out as an import would make
 *   them. First seen wins: the same UID with other content is refused.
 * - analysis: finished analyses are immutable and travel whole, with their model findings, under
 *   the ids they were made with; a second arrival is a no-op.
 * - review: verdict events (server/scans/verdict-events.ts).
 * - report, addendum, finding (reader-drawn): server/reports/report-sync.ts.
 *
 * Taking a change in is split in two: `prepareChanges` does the file work (read, parse, hash)
 * outside any transaction; `applyChange` then runs in the push's (or pull's) transaction and
 * touches only the database, so it may run again when PostgreSQL retries the transaction.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { FINDING_LOCALIZATIONS } from '#common/vocabulary.ts';
import type { RleMask } from '#common/rle-mask.ts';
import { findingMask } from '#server/api/schemas.ts';
import { accepted, findingPlace, isoTime, payloadProblem, publicId, refused, uid, waiting, type ApplyOutcome } from '#server/sync/change-fields.ts';
import { waitKey } from '#server/sync/wait-keys.ts';
import { MiaError } from '#server/errors.ts';
import { archivePathFor } from '#server/imports/archive.ts';
import { indexInstance, prepareArchived, type Prepared, type RefCache } from '#server/imports/ingest.ts';
import { archiveSynced, resultSynced, reviewChanged } from '#server/scans/lifecycle.ts';
import { applyDerivedVerdict } from '#server/scans/verdict-events.ts';
import { findFindingWithScan } from '#server/store/finding-reviews.ts';
import { insertReviewEvent, reviewEventExists } from '#server/store/review-events.ts';
import { UUID7_PATTERN } from '#server/sync/uuid7.ts';
import type { Database } from '#server/store/database.ts';
import { findStoredDigest } from '#server/store/instances.ts';
import { findScan, readArchivedHlc, stampArchived } from '#server/store/scans.ts';
import { findPatientDemographics, quarantineChange } from '#server/store/quarantine.ts';
import type { DicomInstance } from '#server/dicom/parse.ts';
import { adoptIfNewest, analysisExists, insertSyncedAnalysis, readAnalysisSnapshot } from '#server/store/synced-analyses.ts';
import type { LocalChange, SyncEntity } from '#server/sync/replica.ts';
import { applyAddendumChange, applyReaderFindingChange, applyReportChange } from '#server/reports/report-sync.ts';

const sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 in lower-case hex');

export const instancePayload = z.object({
  sha256: sha256Hex,
  size: z.number().int().min(1).max(4 * 1024 ** 3),
  series_uid: uid,
  study_uid: uid,
});

// localization travels only when not 'box', so a box finding's payload is what peers before
// migration 31 send and expect; one from such a peer is a box. A segmentation finding's mask
// travels with it (absent for box models and from replicas before migration 32).
const findingPayload = z.object({
  id: publicId('fnd'),
  confidence: z.number().min(0).max(1),
  ...findingPlace,
  localization: z.enum(FINDING_LOCALIZATIONS).default('box'),
  mask: findingMask.optional(),
});

export const analysisPayload = z.object({
  scan_id: uid,
  model: z.object({ id: z.string().min(1).max(200), name: z.string().max(200), version: z.string().max(100), sha256: z.string().max(64) }),
  thresholds: z.record(z.string(), z.number()),
  /** The model's operating point the thresholds came from; absent from replicas before migration 30. */
  operating_point: z.string().max(100).nullable().optional(),
  triage_labels: z.record(z.string(), z.unknown()),
  recommendation: z.string().max(10_000).nullable(),
  created_at: isoTime,
  started_at: isoTime.nullable(),
  finished_at: isoTime.nullable(),
  findings: z.array(findingPayload).max(10_000),
});

export type { ApplyOutcome };

/** A change from another replica, as pushed or pulled. */
export type RemoteChange = { change_id: string; device_id: string; entity: SyncEntity; key: string; hlc: string; user_id: string | null; payload: unknown };

export const reviewPayload = z.object({
  finding_id: publicId('fnd'),
  verdict: z.enum(['accepted', 'rejected']).nullable(),
  reason: z.string().max(2000).nullable(),
  supersedes: z.array(z.string().max(64)).max(1000),
  created_at: isoTime,
});


/** The change a finished analysis records, in the transaction that stores it. */
export async function analysisChange(tx: Database, analysisRef: number, userId: string | null): Promise<LocalChange | undefined> {
  const snapshot = await readAnalysisSnapshot(tx, analysisRef);
  if (!snapshot) return undefined;
  const a = snapshot.analysis;
  const payload: z.input<typeof analysisPayload> = {
    scan_id: a.scan_id,
    model: { id: a.model_id, name: a.model_name, version: a.model_version, sha256: a.model_sha256 },
    thresholds: JSON.parse(a.thresholds) as Record<string, number>,
    ...(a.operating_point === null ? {} : { operating_point: a.operating_point }),
    triage_labels: JSON.parse(a.triage_labels) as Record<string, unknown>,
    recommendation: a.recommendation,
    created_at: a.created_at,
    started_at: a.started_at,
    finished_at: a.finished_at,
    findings: snapshot.findings.map((f) => ({
      id: f.public_id,
      label: f.label,
      confidence: f.confidence,
      x: f.x,
      y: f.y,
      width: f.width,
      height: f.height,
      instance_uid: f.instance_uid,
      frame: f.frame,
      ...(f.localization === 'box' ? {} : { localization: f.localization }),
      ...(f.mask ? { mask: JSON.parse(f.mask) as RleMask } : {}),
    })),
  };
  return { entity: 'analysis', key: a.public_id, op: 'put', userId, payload };
}

/** The file work of a batch, before its transaction: each instance change's blob read and checked. */
export async function prepareChanges(db: Database, dataDir: string, changes: readonly RemoteChange[]): Promise<Map<string, Prepared | ApplyOutcome>> {
  const prepared = new Map<string, Prepared | ApplyOutcome>();
  for (const change of changes) {
    if (change.entity !== 'instance') continue;
    const payload = instancePayload.safeParse(change.payload);
    if (!payload.success) {
      prepared.set(change.change_id, refused(`instance payload: ${payload.error.issues[0]?.message ?? 'invalid'}`));
      continue;
    }
    const { sha256 } = payload.data;
    // Already here with this content (a batch sent again, a study both sides imported): no need
    // to read and parse the file again.
    if ((await findStoredDigest(db, change.key)) === sha256) {
      prepared.set(change.change_id, accepted);
      continue;
    }
    if (!existsSync(join(dataDir, archivePathFor(sha256)))) {
      // Blobs go before the rows naming them; the pusher uploads it and sends the change again.
      prepared.set(change.change_id, waiting(`file ${sha256} is not here yet: PUT /v1/sync/blobs/${sha256} first`, waitKey.file(sha256)));
      continue;
    }
    prepared.set(change.change_id, await prepareArchived(db, dataDir, sha256, `sync:${change.key}`));
  }
  return prepared;
}

/**
 * What an accepted change brought that waiting changes may wait for (wait-keys.ts): a series with
 * its first instance, an analysis with its findings, a reader's finding, a report.
 */
export function arrivalsOf(change: RemoteChange, prepared: ReadonlyMap<string, Prepared | ApplyOutcome>): string[] {
  switch (change.entity) {
    case 'instance': {
      const p = prepared.get(change.change_id);
      // Already stored (or stored with it), its series was here before.
      return p && !('status' in p) && p.kind === 'store' ? [waitKey.series(p.instance.seriesInstanceUid)] : [];
    }
    case 'analysis': {
      const parsed = analysisPayload.safeParse(change.payload);
      return [waitKey.analysis(change.key), ...(parsed.success ? parsed.data.findings.map((f) => waitKey.finding(f.id)) : [])];
    }
    case 'finding':
      return [waitKey.finding(change.key)];
    case 'report':
      return [waitKey.report(change.key)];
    default:
      return [];
  }
}

/** Takes one change in, inside the caller's transaction. Refusals are outcomes, not throws. */
export async function applyChange(
  tx: Database,
  change: RemoteChange,
  prepared: Map<string, Prepared | ApplyOutcome>,
  refs: RefCache,
  at: string,
  /** An admin released this change from quarantine: the demographics check has been made. */
  options: { admitted?: boolean } = {},
): Promise<ApplyOutcome> {
  try {
    if (change.entity === 'instance') return await applyInstance(tx, change, prepared.get(change.change_id), refs, at, options.admitted === true);
    switch (change.entity) {
      case 'review':
        return await applyReview(tx, change, at);
      case 'analysis':
        return await applyAnalysis(tx, change, at);
      case 'report':
        return await applyReportChange(tx, change, at);
      case 'addendum':
        return await applyAddendumChange(tx, change);
      case 'finding':
        return await applyReaderFindingChange(tx, change, at);
      case 'scan':
        return await applyArchiveFlag(tx, change, at);
    }
  } catch (err) {
    if (err instanceof MiaError) return refused(err.message + (err.details ? ` (${err.details})` : ''));
    throw err;
  }
}

async function applyInstance(tx: Database, change: RemoteChange, p: Prepared | ApplyOutcome | undefined, refs: RefCache, at: string, admitted: boolean): Promise<ApplyOutcome> {
  if (p === undefined) return waiting('instance change was not prepared', null);
  if ('status' in p) return p;
  if (p.kind === 'done') {
    const r = p.result;
    if (r.outcome === 'duplicate' && r.sop_instance_uid === change.key) return accepted;
    if (r.outcome === 'rejected') return refused(`file refused: ${r.reason}`);
    if (r.outcome === 'conflict') return refused(r.reason);
    return refused(`file holds SOP Instance UID ${r.sop_instance_uid}, not ${change.key}`);
  }
  if (p.instance.sopInstanceUid !== change.key) return refused(`file holds SOP Instance UID ${p.instance.sopInstanceUid}, not ${change.key}`);
  const problem = admitted ? null : await demographicsProblem(tx, p.instance);
  if (problem) {
    // Never merged silently: two people under one ID, or a typo on one side. An admin decides.
    await quarantineChange(tx, { change_id: change.change_id, device_id: change.device_id, entity: change.entity, entity_key: change.key, reason: problem, payload: JSON.stringify(change.payload), created_at: at, hlc: change.hlc, user_id: change.user_id });
    return refused(`quarantined for an admin: ${problem}`);
  }
  if (await indexInstance(tx, p, refs, at)) return accepted;
  // Stored meanwhile: the same content is the same instance; other content loses to the first.
  return (await findStoredDigest(tx, change.key)) === p.sha256 ? accepted : refused(`SOP Instance UID ${change.key} is already stored with different content; kept the first`);
}

const kept = (text: string): string | null => (text.trim() === '' ? null : text.trim());

/**
 * Whether the file's patient is one this replica holds under the same Patient ID with other
 * demographics (name, birth date, sex, where both sides have one). The reason names the fields,
 * not their values. An empty Patient ID is not an identity and is not compared.
 */
async function demographicsProblem(tx: Database, i: DicomInstance): Promise<string | null> {
  const patientId = i.patientId.trim();
  if (patientId === '') return null;
  const stored = await findPatientDemographics(tx, patientId);
  if (!stored) return null;
  const fields: [string, string | null, string | null][] = [
    ['name', stored.name, kept(i.patientName)],
    ['birth date', stored.birth_date, kept(i.patientBirthDate)],
    ['sex', stored.sex, kept(i.patientSex)],
  ];
  const differ = fields.filter(([, a, b]) => a !== null && b !== null && a !== b).map(([name]) => name);
  return differ.length === 0 ? null : `Patient ID ${patientId} is held here with another ${differ.join(', ')}`;
}

async function applyAnalysis(tx: Database, change: RemoteChange, at: string): Promise<ApplyOutcome> {
  const parsed = analysisPayload.safeParse(change.payload);
  if (!parsed.success) return payloadProblem('analysis', parsed.error);
  if (!/^ana_[0-9a-f]{24}$/.test(change.key)) return refused('analysis key: an ana_ id');
  if (await analysisExists(tx, change.key)) return accepted;
  const a = parsed.data;
  const scan = await findScan(tx, a.scan_id);
  // Its instances travel first; they may still be on their way (or refused: then this waits too).
  if (!scan) return waiting(`series ${a.scan_id} is not here yet: its instances come first`, waitKey.series(a.scan_id));
  const ref = await insertSyncedAnalysis(
    tx,
    scan.id,
    {
      public_id: change.key,
      model_id: a.model.id,
      model_name: a.model.name,
      model_version: a.model.version,
      model_sha256: a.model.sha256,
      thresholds: JSON.stringify(a.thresholds),
      operating_point: a.operating_point ?? null,
      triage_labels: JSON.stringify(a.triage_labels),
      recommendation: a.recommendation,
      created_at: a.created_at,
      started_at: a.started_at,
      finished_at: a.finished_at,
    },
    a.findings.map(({ mask, ...f }) => ({ ...f, public_id: f.id, mask: mask ? JSON.stringify(mask) : null })),
  );
  if (await adoptIfNewest(tx, scan.id, ref)) await resultSynced(tx, { ref: scan.id, status: scan.status }, at);
  return accepted;
}

/**
 * A verdict event from another replica: kept whole (history is complete everywhere), and the
 * finding's verdict derived again from all its events, so every replica shows the same one.
 */
async function applyReview(tx: Database, change: RemoteChange, at: string): Promise<ApplyOutcome> {
  const parsed = reviewPayload.safeParse(change.payload);
  if (!parsed.success) return payloadProblem('review', parsed.error);
  if (!UUID7_PATTERN.test(change.key)) return refused('review key: a UUIDv7 event id');
  if (await reviewEventExists(tx, change.key)) return accepted;
  const r = parsed.data;
  const finding = await findFindingWithScan(tx, r.finding_id);
  // Its analysis travels first; it may still be on its way.
  if (!finding) return waiting(`finding ${r.finding_id} is not here yet: its analysis comes first`, waitKey.finding(r.finding_id));
  await insertReviewEvent(tx, {
    event_id: change.key,
    finding_ref: finding.id,
    verdict: r.verdict,
    reason: r.verdict === 'rejected' ? r.reason : null,
    user_id: change.user_id,
    hlc: change.hlc,
    supersedes: JSON.stringify(r.supersedes),
    created_at: r.created_at,
  });
  await applyDerivedVerdict(tx, finding.id);
  if (finding.is_latest) await reviewChanged(tx, { ref: finding.scan_ref, status: finding.scan_status }, at);
  return accepted;
}

export const scanFlagPayload = z.object({ archived: z.literal(true) });

/**
 * Archiving, from another workstation: the scan is archived here too. Archived is where a scan's
 * life ends (the state machine lets nothing leave it), so the flag only ever goes one way; its
 * HLC is kept, and a change older than the one held changes nothing.
 */
async function applyArchiveFlag(tx: Database, change: RemoteChange, at: string): Promise<ApplyOutcome> {
  const parsed = scanFlagPayload.safeParse(change.payload);
  if (!parsed.success) return payloadProblem('scan', parsed.error);
  const scan = await findScan(tx, change.key);
  if (!scan) return waiting(`series ${change.key} is not here yet: its instances come first`, waitKey.series(change.key));
  const newest = await readArchivedHlc(tx, scan.id);
  if (newest !== null && newest >= change.hlc) return accepted;
  await archiveSynced(tx, { ref: scan.id, status: scan.status }, at);
  await stampArchived(tx, scan.id, change.hlc);
  return accepted;
}
