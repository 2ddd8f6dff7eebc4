/**
 * The viewer's lesion list follows the reader's verdicts (issue 11): lesions and their verdict
 * are derived by the server, and the list used to keep the grouping of the page load until a
 * reload. A tumour boxed on two neighbouring slices of a phantom CT is one lesion, "not
 * reviewed"; accepting one of its findings makes the lesion "accepted" at once, and rejecting it
 * again brings it back, each from the server's result.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR } from '../helpers/browser.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { seedAnalysis } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { makePhantoms } from '../imports/helpers.ts';

const WAIT = { timeout: 10_000 };
const SEED = 20260302;

let t: TestServer;
let browser: Browser;
let work: string;
let scanId = '';

beforeAll(async () => {
  ensureRendererBuilt();
  work = mkdtempSync(join(tmpdir(), 'mia-lesion-refresh-'));
  makePhantoms(join(work, 'phantoms'), { series: 1, seed: SEED, size: 64, slices: 8, modality: 'CT' });
  t = await startTestServer({ uiDir: UI_DIR });
  const dir = join(work, 'phantoms', `series-${SEED}-CT`);
  for (const name of readdirSync(dir)) scanId = (await seedImportedInstance(t, join(dir, name))).scanId;
  const { db } = t.server.services;
  const row = (await db.get('SELECT s.id, p.patient_id, st.study_uid FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [scanId])) as {
    id: number;
    patient_id: string;
    study_uid: string;
  };
  const instances = (await t.request('GET', `/v1/scans/${scanId}/instances`)).json.data.items as { instance_uid: string }[];
  const on = (slice: number) => ({ instanceUid: instances[slice]!.instance_uid, frame: 0 });
  await seedAnalysis(db, { scanId, patientId: row.patient_id, studyUid: row.study_uid, scanRef: row.id }, [
    { ...on(3), label: 'tumor_detected', confidence: 0.9, x: 20, y: 20, width: 16, height: 14 },
    { ...on(4), label: 'tumor_detected', confidence: 0.8, x: 22, y: 21, width: 14, height: 12 },
  ]);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe("the viewer's lesion list", () => {
  it('shows the verdict the server derives for the lesion after each accept/reject, without a reload', async () => {
    const ui = await openUi(browser, t.url);
    await ui.signIn(t.adminKey);
    await ui.openScan(scanId);
    await expect.poll(() => ui.page.getByTestId('finding').count(), WAIT).toBe(2);
    const verdict = ui.page.getByTestId('lesion-review');
    expect(await ui.page.getByTestId('lesion').count()).toBe(1);
    expect(await verdict.textContent()).toContain('not reviewed');
    // The viewer opens on the first finding's slice: a accepts it.
    await ui.page.keyboard.press('a');
    await expect.poll(() => ui.page.getByTestId('finding').first().getAttribute('data-review'), WAIT).toBe('accepted');
    await expect.poll(() => verdict.textContent(), WAIT).toContain('accepted');
    await ui.screenshot('viewer-lesion-accepted');
    // Rejected (r on an accepted finding rejects it): neither slice accepted, one not reviewed.
    await ui.page.keyboard.press('r');
    await expect.poll(() => ui.page.getByTestId('finding').first().getAttribute('data-review'), WAIT).toBe('rejected');
    await expect.poll(() => verdict.textContent(), WAIT).toContain('not reviewed');
    // The server agrees with what the list shows.
    const lesions = (await t.request('GET', `/v1/scans/${scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data.lesions as { review: string | null }[];
    expect(lesions.map((l) => l.review)).toEqual([null]);
    await ui.page.context().close();
  });
});
