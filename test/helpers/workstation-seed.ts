/**
 * Data for the UI tests: real phantom DICOM series imported through the API (so the viewer has
 * real pixels), plus analyses with findings on real instance UIDs, plus a few more scans so
 * the worklist has something to sort.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestServer } from './server.ts';
import { seedAnalysis, seedScan, type SeededScan } from './seed.ts';

const PHANTOMS = join(import.meta.dirname, '..', '..', 'models', 'mia-phantom-detector', 'phantoms.py');

export type SeededFinding = { id: string; location: { x: number; y: number; width: number; height: number }; sliceIndex: number };
export type SeededWorkstation = { scanCount: number; target: { scanId: string; findings: SeededFinding[] } };

type Instance = { instance_uid: string; rows: number; columns: number; frames: number };

async function importPhantoms(t: TestServer): Promise<string[]> {
  const dir = mkdtempSync(join(tmpdir(), 'mia-e2e-phantoms-'));
  try {
    execFileSync('/usr/bin/python3', [PHANTOMS, '--out', dir, '--series', '2', '--seed', '424242', '--modality', 'MR', '--size', '128', '--slices', '12', '--kinds', 'tumor'], {
      stdio: 'ignore',
    });
    const started = await t.request('POST', '/v1/imports', { body: { path: dir } });
    if (started.status !== 202 && started.status !== 201) throw new Error(`import: ${started.status} ${started.text.slice(0, 200)}`);
    const id = started.json.data.id as string;
    for (let i = 0; i < 600; i += 1) {
      const job = await t.request('GET', `/v1/imports/${id}`);
      if (!['queued', 'running', 'importing'].includes(job.json.data.status)) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const scans = await t.request('GET', '/v1/scans?limit=500');
    return scans.json.data.items.map((s: any) => s.scan_id as string);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function scanRefOf(t: TestServer, scanId: string): SeededScan {
  const row = t.server.services.db.prepare('SELECT s.id, st.study_uid FROM scans s JOIN studies st ON st.id = s.study_ref WHERE s.scan_id = ?').get(scanId) as {
    id: number;
    study_uid: string;
  };
  return { scanId, patientId: '', studyUid: row.study_uid, scanRef: row.id };
}

export async function seedWorkstation(t: TestServer): Promise<SeededWorkstation> {
  const db = t.server.services.db;
  const imported = await importPhantoms(t);
  const targetId = imported[0];
  if (!targetId) throw new Error('the phantom import produced no scans');
  const listed = await t.request('GET', `/v1/scans/${targetId}/instances?limit=500`);
  if (listed.status !== 200) throw new Error(`GET /v1/scans/{id}/instances: ${listed.status} ${listed.text.slice(0, 200)}`);
  const instances = listed.json.data.items as Instance[];
  const a = instances[4]!;
  const b = instances[7]!;
  const boxes = [
    { x: 40, y: 36, width: 28, height: 22, confidence: 0.93, instance: a, sliceIndex: 4 },
    { x: 70, y: 64, width: 20, height: 18, confidence: 0.71, instance: b, sliceIndex: 7 },
  ];
  seedAnalysis(
    db,
    scanRefOf(t, targetId),
    boxes.map((box) => ({ x: box.x, y: box.y, width: box.width, height: box.height, confidence: box.confidence, instanceUid: box.instance.instance_uid, frame: 0 })),
  );
  for (const other of imported.slice(1)) seedAnalysis(db, scanRefOf(t, other), [{ confidence: 0.55, label: 'hemorrhage_detected' }]);
  // Scans without pixels, for sorting and filtering.
  seedAnalysis(db, seedScan(db, { modality: 'CT', description: 'Head without contrast' }), [{ confidence: 0.62 }]);
  seedScan(db, { modality: 'MR', description: 'FLAIR axial' });

  const result = await t.request('GET', `/v1/scans/${targetId}/results`, { headers: { 'API-Version': '1.1' } });
  const findings = (result.json.data.findings as any[]).map((f, i) => ({ id: f.id as string, location: f.location, sliceIndex: boxes[i]!.sliceIndex }));
  return { scanCount: imported.length + 2, target: { scanId: targetId, findings } };
}
