/**
 * Issue 11 in Debian's Chromium against the real server: (1) a radiograph measured with its
 * Imager Pixel Spacing is labelled at the detector ("mm (detector)") in the viewer and in the
 * report; (2) a report screen opened before another session finalized the scan's report gets the
 * server's 409 on "Draft report" and shows the final report with its addendum form instead.
 * Generated DX files: pydicom's CT_small (128 x 128) re-tagged, Imager Pixel Spacing 0.5\0.5.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { CT_SMALL, seedImportedInstance } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis } from '../helpers/seed.ts';

const WAIT = { timeout: 10_000 };

let t: TestServer;
let browser: Browser;
let work: string;
let reader = '';

beforeAll(async () => {
  ensureRendererBuilt();
  work = mkdtempSync(join(tmpdir(), 'mia-detector-'));
  t = await startTestServer({ uiDir: UI_DIR });
  reader = (await t.keyFor('radiologist')).key;
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

/** A DX radiograph (CT_small re-tagged, new UIDs) with only Imager Pixel Spacing, imported and analysed. */
async function radiograph(name: string): Promise<string> {
  const out = join(work, `${name}.dcm`);
  const script = [
    'import sys, pydicom',
    'from pydicom.uid import generate_uid',
    'ds = pydicom.dcmread(sys.argv[1])',
    'ds.SeriesInstanceUID = generate_uid()',
    'ds.SOPInstanceUID = generate_uid()',
    'ds.file_meta.MediaStorageSOPInstanceUID = ds.SOPInstanceUID',
    'ds.Modality = "DX"',
    'del ds.PixelSpacing',
    'ds.ImagerPixelSpacing = [0.5, 0.5]',
    'ds.save_as(sys.argv[2], write_like_original=False)',
  ].join('\n');
  execFileSync('/usr/bin/python3', ['-c', script, CT_SMALL, out], { stdio: ['ignore', 'ignore', 'inherit'] });
  const { scanId } = await seedImportedInstance(t, out);
  const row = (await t.server.services.db.get('SELECT s.id, st.study_uid, p.patient_id FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [scanId])) as { id: number; study_uid: string; patient_id: string };
  await seedAnalysis(t.server.services.db, { scanId, scanRef: row.id, studyUid: row.study_uid, patientId: row.patient_id }, [{}]);
  return scanId;
}

async function pageAt(ui: Ui, column: number, row: number): Promise<{ x: number; y: number }> {
  const canvas = ui.page.getByTestId('viewport-canvas');
  const box = await canvas.boundingBox();
  if (!box) throw new Error('no canvas');
  const attr = async (name: string) => Number(await canvas.getAttribute(name));
  return { x: box.x + (await attr('data-offset-x')) + column * (await attr('data-scale')), y: box.y + (await attr('data-offset-y')) + row * (await attr('data-scale-y')) };
}

describe('detector-plane spacing and the final-report conflict', () => {
  it('labels a length on a radiograph "mm (detector)" in the viewer and the report', async () => {
    const scanId = await radiograph('dx');
    const ui = await openUi(browser, t.url);
    await ui.signIn(reader);
    await ui.openScan(scanId);
    await expect.poll(() => ui.page.getByTestId('viewport-canvas').getAttribute('data-rendered-slice'), WAIT).toBe('0');
    await ui.page.getByTestId('measure-length').click();
    const a = await pageAt(ui, 14, 64);
    const b = await pageAt(ui, 114, 64);
    await ui.page.mouse.move(a.x, a.y);
    await ui.page.mouse.down();
    await ui.page.mouse.move(b.x, b.y, { steps: 6 });
    await ui.page.mouse.up();
    const label = ui.page.getByTestId('measure-label');
    await expect.poll(() => label.count(), WAIT).toBe(1);
    // 100 columns at 0.5 mm, measured at the detector.
    await expect.poll(() => label.textContent(), WAIT).toMatch(/^50\.0 mm \(detector\)/);
    await ui.page.keyboard.press('Escape');
    await ui.screenshot('detector-length-viewer');

    await ui.openReport(scanId);
    await ui.page.getByTestId('draft-report').click();
    await expect.poll(() => ui.page.getByTestId('report-measurement').count(), WAIT).toBe(1);
    await expect(ui.page.getByTestId('report-measurement').textContent()).resolves.toContain('50.0 mm (detector)');
  }, 60_000);

  it('Draft report after another session finalized the scan\'s report: the 409 is shown with the final report and its addendum form', async () => {
    const scanId = await radiograph('dx-final');
    const ui = await openUi(browser, t.url);
    await ui.signIn(reader);
    await ui.openReport(scanId);
    await expect.poll(() => ui.page.getByTestId('draft-report').count(), WAIT).toBe(1);
    // Meanwhile, elsewhere: drafted and signed.
    const other = (await t.request('POST', '/v1/reports', { key: reader, body: { scan_id: scanId } })).json.data;
    expect((await t.request('PATCH', `/v1/reports/${other.id}`, { key: reader, body: { status: 'final' } })).status).toBe(200);

    await ui.page.getByTestId('draft-report').click();
    await expect.poll(() => ui.page.getByTestId('addenda').count(), WAIT).toBe(1);
    await expect(ui.page.getByRole('alert').first().textContent()).resolves.toContain(other.id);
    await expect(ui.page.getByTestId('report-conflict-hint').textContent()).resolves.toContain('add an addendum');
    await expect(ui.page.getByTestId('add-addendum').count()).resolves.toBe(1);
    const reports = await t.request('GET', `/v1/reports?scan_id=${scanId}`, { key: reader });
    expect(reports.json.data.items).toHaveLength(1);
    await ui.screenshot('report-final-conflict');
  }, 60_000);
});
