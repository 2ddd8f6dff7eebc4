/**
 * A benchmark server process: either mia on a data folder seeded with N analysed scans, or a
 * bare Express handler returning a payload of the same size. Prints its URL (and for mia a
 * key) as one JSON line on stdout, then serves until killed.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { issueKeyForUser } from '#server/auth/api-keys.ts';
import { systemClock } from '#server/clock.ts';
import { createServer } from '#server/create-server.ts';
import { insertCompletedAnalysis } from '#server/store/analyses.ts';
import { upsertPatient, upsertScan, upsertStudy } from '#server/store/archive-index.ts';
import { inTransaction } from '#server/store/database.ts';
import { findOrCreateUser } from '#server/users/users.ts';

const [mode = 'mia', countArg = '1000'] = process.argv.slice(2);

async function mia(scans: number): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'mia-bench-'));
  // The per-key limit would cap the load generator; the check itself still runs on every request.
  const server = await createServer({ dataDir, rateLimit: { requests: 10_000_000, windowMs: 60_000, authFailures: 1000 } });
  const { db } = server.services;
  const at = new Date().toISOString();
  await inTransaction(db, async (tx) => {
    for (let i = 0; i < scans; i += 1) {
      const patientRef = await upsertPatient(tx, { patientId: `BENCH-${i % 300}`, name: null, birthDate: null, sex: null }, at);
      const studyRef = await upsertStudy(tx, patientRef, { studyUid: `1.2.826.0.1.9.${i}`, studyDate: '20260301', studyTime: null, description: 'Head', accessionNumber: null }, at);
      const scanRef = await upsertScan(tx, studyRef, { scanId: `1.2.826.0.1.9.${i}.1`, modality: i % 2 ? 'CT' : 'MR', bodyPart: 'HEAD', description: null, seriesNumber: 1 }, at);
      await insertCompletedAnalysis(tx, {
        scanRef,
        model: { id: 'mia-phantom-detector', name: 'mia phantom detector', version: '1.0.0', sha256: 'ab'.repeat(32) },
        thresholds: { tumor_detected: 0.5 },
        recommendation: 'Follow-up MRI in 3 months.',
        findings: Array.from({ length: i % 3 }, (_, f) => ({
          label: 'tumor_detected',
          confidence: 0.6 + f / 10,
          x: 10,
          y: 20,
          width: 30,
          height: 40,
          instanceUid: `1.2.826.0.1.9.${i}.1.${f}`,
          frame: 0,
        })),
        startedAt: at,
        finishedAt: at,
      });
    }
  });
  const { user } = await findOrCreateUser({ db, clock: systemClock }, { email: 'bench@bench.local', role: 'admin' });
  const { key } = await issueKeyForUser({ db, clock: systemClock }, { userRef: user.id, name: 'bench', extraScopes: [] });
  const url = await server.listen(0, '127.0.0.1');
  process.stdout.write(JSON.stringify({ url, key }) + '\n');
}

async function bare(payloadBytes: number): Promise<void> {
  const app = express();
  const body = JSON.stringify({ items: 'x'.repeat(Math.max(0, payloadBytes - 20)) });
  app.get('/v1/scan/results', (_req, res) => {
    res.type('application/json').send(body);
  });
  await new Promise<void>((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      process.stdout.write(JSON.stringify({ url: `http://127.0.0.1:${port}`, key: '' }) + '\n');
      resolve();
    });
  });
}

process.once('SIGINT', () => process.exit(0));
if (mode === 'bare') await bare(Number(countArg));
else await mia(Number(countArg));
