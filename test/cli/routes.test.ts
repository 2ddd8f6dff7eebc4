/** `mia routes`: routing rules without the admin screen, as a real process on a real data folder. */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openDataFolder } from '#server/data-folder.ts';
import { createPeer } from '#server/peers/peers.ts';
import { systemClock } from '#server/clock.ts';

const BIN = join(import.meta.dirname, '../../bin/mia.js');
const dataDir = mkdtempSync(join(tmpdir(), 'mia-cli-routes-'));

function mia(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const run = spawnSync(process.execPath, [BIN, ...args, '--data', dataDir], { encoding: 'utf8', timeout: 60_000 });
  return { status: run.status, stdout: run.stdout, stderr: run.stderr };
}

beforeAll(async () => {
  const folder = await openDataFolder(dataDir, {});
  try {
    await createPeer({ db: folder.db, clock: systemClock }, { kind: 'dimse', name: 'PACS', ae_title: 'PACS', host: '127.0.0.1', port: 11112, allow_incoming: false }, 'test');
  } finally {
    await folder.close();
  }
});
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

it('adds, lists, disables and removes a rule; refuses a bad one naming the field', () => {
  const added = mia('routes', 'add', 'CT to PACS', '--event', 'analysis.finished', '--peer', 'PACS', '--modality', 'CT', '--positive-only');
  expect(added.stderr).toBe('');
  expect(added.status).toBe(0);
  expect(added.stdout).toMatch(/^rule_[0-9a-f]{24}: CT to PACS: on analysis.finished send analysis_sr to PACS by c-store \(modality CT, positive\)/);

  const listed = mia('routes', 'list');
  expect(listed.status).toBe(0);
  expect(listed.stdout).toMatch(/CT to PACS\s+analysis.finished\s+modality CT, positive\s+analysis_sr\s+PACS\s+c-store\s+yes/);

  expect(mia('routes', 'disable', 'CT to PACS').stdout).toContain('CT to PACS: disabled');
  expect(mia('routes', 'list').stdout).toMatch(/c-store\s+no/);

  const bad = mia('routes', 'add', 'lower', '--event', 'analysis.finished', '--peer', 'PACS', '--modality', 'ct');
  expect(bad.status).toBe(1);
  expect(bad.stderr).toMatch(/conditions\.modalities\.0: a DICOM modality/);
  const noPeer = mia('routes', 'add', 'nowhere', '--event', 'report.finalized', '--peer', 'nobody');
  expect(noPeer.status).toBe(1);
  expect(noPeer.stderr).toMatch(/Peer/);

  const jobs = mia('routes', 'jobs', '--status', 'queued');
  expect(jobs.status).toBe(0);
  expect(jobs.stdout).toMatch(/^ID\s+STATUS/);
  expect(mia('routes', 'jobs', '--status', 'lost').status).toBe(1);

  expect(mia('routes', 'remove', 'CT to PACS').stdout).toContain('removed');
  expect(mia('routes', 'list').stdout).not.toContain('CT to PACS');
});
