/**
 * Issue 11, reading tools, in Debian's Chromium: a lesion the model boxed on three neighbouring
 * slices is one lesion in the viewer's list (slices and largest diameter in mm) and one line of
 * the report, whose findings are sizes in mm with slices, not pixel boxes. The image is
 * nibabel's philips_mprage.dcm, a real Enhanced MR whose frames carry their own positions and
 * spacing, so the slice numbers are the stack's, not frame numbers.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR } from '../helpers/browser.ts';
import { philipsMprage } from '../helpers/enhanced.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { seedAnalysis } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let browser: Browser;
const WAIT = { timeout: 10_000 };

beforeAll(async () => {
  ensureRendererBuilt();
  t = await startTestServer({ uiDir: UI_DIR });
  browser = await launchBrowser();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

type FrameValue = { position: number | null; pixel_spacing: [number, number] | null };

describe('one lesion, one finding, in mm', () => {
  it('groups a three-slice tumour in the viewer and reports it once with its size in mm', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'mia-lesions-')), 'philips_mprage.dcm');
    writeFileSync(file, philipsMprage());
    const image = await seedImportedInstance(t, file);
    const { db } = t.server.services;
    const row = (await db.get('SELECT s.id, p.patient_id, st.study_uid FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [image.scanId])) as {
      id: number;
      patient_id: string;
      study_uid: string;
    };
    const scan = { scanId: image.scanId, patientId: row.patient_id, studyUid: row.study_uid, scanRef: row.id };
    const instance = (await t.request('GET', `/v1/scans/${scan.scanId}/instances`)).json.data.items[0] as { frames: number; frame_values: FrameValue[]; pixel_spacing: [number, number] };
    // The stack's order: frames by their own positions.
    const stack = [...instance.frame_values.keys()].sort((a, b) => (instance.frame_values[a]!.position ?? 0) - (instance.frame_values[b]!.position ?? 0));
    const [f4, f5, f6] = [stack[3]!, stack[4]!, stack[5]!];
    const on = (frame: number) => ({ instanceUid: image.instanceUid, frame });
    await seedAnalysis(db, scan, [
      { ...on(f5), label: 'tumor_detected', confidence: 0.92, x: 40, y: 40, width: 40, height: 30 },
      { ...on(f4), label: 'tumor_detected', confidence: 0.81, x: 45, y: 42, width: 30, height: 24 },
      { ...on(f6), label: 'tumor_detected', confidence: 0.77, x: 42, y: 45, width: 28, height: 20 },
      { ...on(f5), label: 'infarct_detected', confidence: 0.7, x: 150, y: 150, width: 20, height: 20 },
    ]);
    const [rowMm, columnMm] = instance.frame_values[f5]!.pixel_spacing ?? instance.pixel_spacing;
    const round1 = (mm: number) => Math.round(mm * 10) / 10;
    const largest = round1(Math.max(40 * columnMm, 30 * rowMm));

    const reader = await t.keyFor('radiologist', { email: 'dr.reader@hospital.test' });
    const ui = await openUi(browser, t.url);
    await ui.signIn(reader.key);
    await ui.openScan(scan.scanId);
    await expect.poll(() => ui.page.getByTestId('finding').count(), WAIT).toBe(4);
    // One lesion header over its three slices, the slices listed together.
    expect(await ui.page.getByTestId('lesion').count()).toBe(1);
    const head = await ui.page.getByTestId('lesion').textContent();
    expect(head).toContain(`largest diameter ${largest} mm, slices 4–6 of ${instance.frames}`);
    const rows = ui.page.getByTestId('finding');
    const lesionIds = await rows.evaluateAll((els) => els.map((el) => el.getAttribute('data-lesion-id')));
    expect(lesionIds.slice(0, 3).every((id) => id !== '' && id === lesionIds[0])).toBe(true);
    expect(lesionIds[3]).toBe('');
    // The lesion's findings by slice under its head, each with its own size in mm.
    expect(await rows.nth(0).textContent()).toContain(`slice 4, ${round1(30 * columnMm)} × ${round1(24 * rowMm)} mm`);
    expect(await rows.nth(1).textContent()).toContain(`slice 5, ${round1(40 * columnMm)} × ${round1(30 * rowMm)} mm`);
    await ui.page.getByText('Loading image').waitFor({ state: 'hidden', ...WAIT });
    await ui.screenshot('lesions-viewer');

    // Accept the lesion on its largest slice; the report lists it once, in mm.
    await rows.nth(1).click();
    await rows.nth(1).getByTestId('accept-finding').click();
    await expect.poll(() => rows.nth(1).getAttribute('data-review'), WAIT).toBe('accepted');
    expect((await t.request('POST', '/v1/reports', { key: reader.key, body: { scan_id: scan.scanId } })).status).toBe(201);
    await ui.openReport(scan.scanId);
    await ui.page.getByTestId('report-lesions').waitFor(WAIT);
    const lesionRows = ui.page.getByTestId('report-lesion');
    expect(await lesionRows.count()).toBe(2);
    const tumourRow = await lesionRows.filter({ hasText: /tumou?r/i }).textContent();
    expect(tumourRow).toContain(`largest diameter ${largest} mm`);
    expect(tumourRow).toContain(`slices 4–6 of ${instance.frames}`);
    expect(tumourRow).toContain('3 findings, one lesion');
    expect(tumourRow).toContain('accepted');
    expect(await ui.page.getByTestId('report-lesions').textContent()).not.toMatch(/x \d+, y \d+/);
    // The suggested impression: one line for the lesion, in mm and slices.
    const impression = await ui.page.getByTestId('impression').inputValue();
    expect(impression).toMatch(new RegExp(`: largest diameter ${largest} mm, slices 4–6 of ${instance.frames} \\(AI confidence 92%\\)\\.`));
    expect(impression.split('\n').filter((l) => l.startsWith('- '))).toHaveLength(1);
    await ui.screenshot('lesions-report');
  }, 60_000);
});
