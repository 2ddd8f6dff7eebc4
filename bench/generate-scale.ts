/**
 * A data folder at hospital scale (issue 15, item 3): patients with several studies over ten
 * years, one to four series each across the usual modalities, most analysed with 0-6 findings,
 * some reviewed (accepted or rejected findings) and reported. Rows go straight into the SQLite
 * store that `openDatabase` migrates, prepared statements in one transaction per chunk, so
 * 100,000 scans take seconds, not the hours an import of real files would.
 *
 *   node --import tsx bench/generate-scale.ts <dir> --scans 100000 [--findings 300000] [--seed 1]
 *   node bin/mia.js serve --data <dir>
 *
 * The same seed gives the same rows. No instances are written: triage reasons then name no
 * slice, which is what a scan whose files were pruned shows.
 */
import { newPublicId } from '#server/store/public-id.ts';
import { openDatabase } from '#server/store/sqlite.ts';
import { seededRandom } from '../test/helpers/random.ts';

export type ScaleOptions = { scans: number; findings: number; seed: number; chunk?: number };
export type ScaleCounts = { patients: number; studies: number; scans: number; analyses: number; findings: number; reports: number; ms: number };

const MODALITIES = [
  ['CT', 30],
  ['MR', 25],
  ['CR', 15],
  ['DX', 10],
  ['US', 10],
  ['MG', 5],
  ['PT', 5],
] as const;
const BODY_PARTS = ['HEAD', 'CHEST', 'ABDOMEN', 'PELVIS', 'SPINE', 'KNEE', 'BREAST'] as const;
const SERIES_DESCRIPTIONS = ['Axial', 'Sagittal T1', 'Coronal T2', 'FLAIR', 'DWI', 'Post contrast', 'Scout', 'Bone window'] as const;
const STUDY_DESCRIPTIONS = ['Head without contrast', 'Brain MRI', 'Chest PA', 'Abdomen and pelvis', 'Lumbar spine', 'Knee left', 'Screening mammogram', 'Whole body PET'] as const;
const FAMILY = ['MÜLLER', 'SMITH', 'GARCÍA', 'NGUYEN', 'KOWALSKI', 'ROSSI', 'JOHANSSON', 'DUBOIS', 'OKAFOR', 'TANAKA', 'BRANDT', 'LEHTINEN'] as const;
const GIVEN = ['HANS', 'ANNA', 'JOSÉ', 'MAI', 'PIOTR', 'GIULIA', 'ERIK', 'CLAIRE', 'CHIDI', 'YUKI', 'LENA', 'AINO'] as const;
const LABELS = ['tumor_detected', 'hemorrhage_detected', 'infarct_detected'] as const;
const TRIAGE_LABELS = JSON.stringify({
  tumor_detected: { urgency: 'soon', display_name: 'Mass / tumour' },
  hemorrhage_detected: { urgency: 'urgent', display_name: 'Intracranial haemorrhage' },
  infarct_detected: { urgency: 'urgent', display_name: 'Infarct' },
});
// Analysed scans move on as they are read; the rest wait or failed.
const STATUSES = [
  ['analyzed', 55],
  ['in_review', 8],
  ['reviewed', 10],
  ['reported', 12],
  ['archived', 3],
  ['received', 9],
  ['failed', 3],
] as const;
const ANALYSED = new Set(['analyzed', 'in_review', 'reviewed', 'reported', 'archived']);


function weighted<T extends string>(next: () => number, table: readonly (readonly [T, number])[]): T {
  const total = table.reduce((sum, [, w]) => sum + w, 0);
  let pick = next() * total;
  for (const [value, weight] of table) {
    pick -= weight;
    if (pick < 0) return value;
  }
  return table[0]![0];
}

function pick<T>(next: () => number, values: readonly T[]): T {
  return values[Math.floor(next() * values.length)]!;
}

function hexId(prefix: string, n: number, salt: number): string {
  return `${prefix}_${salt.toString(16).padStart(8, '0')}${n.toString(16).padStart(16, '0')}`;
}

/** Writes the rows into `dir`'s database (created and migrated if new) and closes it. */
export async function generateScale(dir: string, options: ScaleOptions): Promise<ScaleCounts> {
  const started = performance.now();
  const store = openDatabase(dir);
  const db = store.connection;
  const next = seededRandom(options.seed);
  const salt = Math.floor(next() * 0xffffffff);
  const chunk = options.chunk ?? 5000;
  const now = new Date().toISOString();
  const bench = db.prepare(`INSERT INTO users (public_id, email, name, role, created_at, updated_at) VALUES (?, ?, 'Scale Reader', 'radiologist', ?, ?)
    ON CONFLICT (email) DO UPDATE SET name = excluded.name RETURNING id`).get(newPublicId('usr'), 'scale-reader@bench.local', now, now) as { id: number };
  // Run again on the same folder, the tool adds rows after the ones there: ids stay unique.
  const highest = (table: string) => (db.prepare(`SELECT coalesce(max(id), 0) AS n FROM ${table}`).get() as { n: number }).n;
  const [base, patientBase, studyBase, highestFinding] = [highest('scans'), highest('patients'), highest('studies'), highest('findings')];

  // The folded columns as store/archive-index.ts writes them (searches read those).
  const insertPatient = db.prepare(`INSERT INTO patients (patient_id, name, birth_date, sex, name_fold, patient_id_fold, created_at)
    VALUES (@id, @name, @birth, @sex, mia_search_fold(@name), mia_search_fold(@id), @at)`);
  const insertStudy = db.prepare(`INSERT INTO studies (study_uid, patient_ref, study_date, study_time, description, accession_number, text_fold, created_at)
    VALUES (@uid, @patient, @date, @time, @description, @accession, mia_search_fold(@accession || ' ' || @description), @at)`);
  const insertScan = db.prepare(`INSERT INTO scans (scan_id, study_ref, modality, body_part, description, series_number, instance_count, status, status_reason, created_at, updated_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`);
  const insertAnalysis = db.prepare(`INSERT INTO analyses (public_id, scan_ref, model_id, model_name, model_version, model_sha256, thresholds, triage_labels, status,
      recommendation, created_at, started_at, finished_at) VALUES (?, ?, 'mia-phantom-detector', 'mia phantom detector', '1.0.0', ?, '{"tumor_detected":0.5}', ?, 'succeeded', ?, ?, ?, ?)`);
  const insertFinding = db.prepare(`INSERT INTO findings (public_id, analysis_ref, label, confidence, x, y, width, height, instance_uid, frame, review, reviewed_by, reviewed_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)`);
  const setLatest = db.prepare('UPDATE scans SET latest_analysis_ref = ? WHERE id = ?');
  const insertReport = db.prepare(`INSERT INTO reports (public_id, scan_ref, analysis_ref, status, impression, recommendation, author_ref, created_at, updated_at, finalized_at, finalized_by)
    VALUES (?, ?, ?, 'final', ?, 'Follow-up in 3 months.', ?, ?, ?, ?, ?)`);
  const sha = 'ab'.repeat(32);

  const counts: ScaleCounts = { patients: 0, studies: 0, scans: 0, analyses: 0, findings: 0, reports: 0, ms: 0 };
  // Findings are dealt so the total lands near the target: each analysed scan draws around the
  // mean still owed, within 0 and twice that mean (0-6 at 100,000 scans and 300,000 findings).
  const analysedShare = STATUSES.filter(([s]) => ANALYSED.has(s)).reduce((n, [, w]) => n + w, 0) / STATUSES.reduce((n, [, w]) => n + w, 0);
  let owed = options.findings;
  let analysedLeft = Math.max(1, Math.round(options.scans * analysedShare));
  let patientRef = 0;
  let studyRef = 0;
  let studiesLeft = 0;
  let seriesLeft = 0;
  let study = { date: '', description: '', number: 0 };

  const writeChunk = db.transaction((count: number) => {
    for (let i = 0; i < count; i += 1) {
      const n = base + counts.scans + 1;
      if (seriesLeft === 0) {
        if (studiesLeft === 0) {
          const p = patientBase + counts.patients + 1;
          const birthYear = 1930 + Math.floor(next() * 90);
          patientRef = Number(
            insertPatient.run({ id: `SC${p.toString().padStart(9, '0')}`, name: `${pick(next, FAMILY)}^${pick(next, GIVEN)}`, birth: `${birthYear}0${1 + Math.floor(next() * 9)}15`, sex: next() < 0.5 ? 'F' : 'M', at: now }).lastInsertRowid,
          );
          counts.patients += 1;
          studiesLeft = 1 + Math.floor(next() * 5);
        }
        const day = new Date(Date.UTC(2016, 0, 1) + Math.floor(next() * 3650) * 86_400_000);
        study = { date: day.toISOString().slice(0, 10).replaceAll('-', ''), description: pick(next, STUDY_DESCRIPTIONS), number: 0 };
        studyRef = Number(
          insertStudy.run({
            uid: `1.2.826.0.1.3680043.10.${salt}.${studyBase + counts.studies + 1}`, patient: patientRef, date: study.date, time: '101500',
            description: study.description, accession: `A${(studyBase + counts.studies + 1).toString().padStart(9, '0')}`, at: now,
          }).lastInsertRowid,
        );
        counts.studies += 1;
        studiesLeft -= 1;
        seriesLeft = 1 + Math.floor(next() * 4);
      }
      seriesLeft -= 1;
      study.number += 1;
      const status = weighted(next, STATUSES);
      const at = `${study.date.slice(0, 4)}-${study.date.slice(4, 6)}-${study.date.slice(6, 8)}T10:15:00.000Z`;
      const scanRef = Number(
        insertScan.run(
          `1.2.826.0.1.3680043.10.${salt}.${studyBase + counts.studies}.${study.number}`,
          studyRef,
          weighted(next, MODALITIES),
          pick(next, BODY_PARTS),
          pick(next, SERIES_DESCRIPTIONS),
          study.number,
          1 + Math.floor(next() * 300),
          status,
          status === 'failed' ? 'no model for this modality' : null,
          at,
          at,
        ).lastInsertRowid,
      );
      counts.scans += 1;
      if (!ANALYSED.has(status)) continue;
      const analysisRef = Number(insertAnalysis.run(hexId('ana', n, salt), scanRef, sha, TRIAGE_LABELS, 'Follow-up MRI in 3 months.', at, at, at).lastInsertRowid);
      counts.analyses += 1;
      setLatest.run(analysisRef, scanRef);
      const mean = owed / analysedLeft;
      const most = Math.max(6, Math.ceil(mean * 2));
      const findings = analysedLeft === 1 ? owed : Math.min(owed, Math.max(0, Math.round(mean + (next() - 0.5) * most)));
      analysedLeft = Math.max(1, analysedLeft - 1);
      owed -= findings;
      const reviewed = status === 'reviewed' || status === 'reported' || status === 'archived';
      for (let f = 0; f < findings; f += 1) {
        const review = reviewed ? (next() < 0.8 ? 'accepted' : 'rejected') : null;
        insertFinding.run(
          hexId('fnd', counts.findings + 1 + highestFinding, salt),
          analysisRef,
          pick(next, LABELS),
          Math.round((0.3 + next() * 0.7) * 1000) / 1000,
          Math.floor(next() * 400),
          Math.floor(next() * 400),
          10 + Math.floor(next() * 60),
          10 + Math.floor(next() * 60),
          `1.2.826.0.1.3680043.10.${salt}.${studyBase + counts.studies}.${study.number}.${1 + f}`,
          review,
          review ? bench.id : null,
          review ? at : null,
        );
        counts.findings += 1;
      }
      if (status === 'reported' || status === 'archived') {
        insertReport.run(hexId('rpt', n, salt), scanRef, analysisRef, findings > 0 ? 'Findings as marked.' : 'No acute abnormality.', bench.id, at, at, at, bench.id);
        counts.reports += 1;
      }
    }
  });
  while (counts.scans < options.scans) writeChunk(Math.min(chunk, options.scans - counts.scans));
  db.pragma('optimize');
  await store.close();
  counts.ms = performance.now() - started;
  return counts;
}

function option(args: readonly string[], name: string, fallback: number): number {
  const at = args.indexOf(name);
  if (at < 0) return fallback;
  const value = Number(args[at + 1]);
  if (!Number.isSafeInteger(value) || value < 0) throw new Error(`${name}: expected a whole number, got ${args[at + 1] ?? 'nothing'}`);
  return value;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const dir = args[0];
  if (!dir || dir.startsWith('--')) {
    process.stderr.write('usage: node --import tsx bench/generate-scale.ts <dir> [--scans 100000] [--findings 3 per scan] [--seed 1]\n');
    process.exit(2);
  }
  const scans = option(args, '--scans', 100_000);
  const counts = await generateScale(dir, { scans, findings: option(args, '--findings', scans * 3), seed: option(args, '--seed', 1) });
  process.stdout.write(`${JSON.stringify(counts)}\n`);
}
