/**
 * Issue 11, reading tools, in Debian's Chromium: the radiologist draws a box the model missed and
 * labels it from the glossary, and rejects a model finding with a reason; both are kept by the
 * server and shown in the report.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR } from '../helpers/browser.ts';
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

type ApiFinding = { id: string; label: string; source: string; review: string | null; review_reason: string | null; location: { x: number; y: number; width: number; height: number }; place: { width_mm: number } };

describe('reader-drawn findings and reasons for rejecting', () => {
  it('draws a missed tumour, rejects the infarct with a reason, and the report shows both', async () => {
    // pydicom's CT_small (128 x 128) with the model's infarct in its top-left corner.
    const image = await seedImportedInstance(t);
    const { db } = t.server.services;
    const scanRef = ((await db.get('SELECT id FROM scans WHERE scan_id = ?', [image.scanId])) as { id: number }).id;
    await seedAnalysis(db, { scanId: image.scanId, patientId: '', studyUid: '', scanRef }, [
      { label: 'infarct_detected', confidence: 0.7, x: 10, y: 10, width: 20, height: 20, instanceUid: image.instanceUid },
    ]);
    const reader = await t.keyFor('radiologist', { email: 'dr.reader@hospital.test' });
    const ui = await openUi(browser, t.url);
    await ui.signIn(reader.key);
    await ui.openScan(image.scanId);
    await expect.poll(() => ui.page.getByTestId('finding').count(), WAIT).toBe(1);
    await ui.page.getByText('Loading image').waitFor({ state: 'hidden', ...WAIT });

    // Draw: the tool on, a drag over the middle of the image, a glossary label, Add.
    await ui.page.getByTestId('draw-finding').click();
    const layer = (await ui.page.getByTestId('draw-finding-layer').boundingBox())!;
    const cx = layer.x + layer.width / 2;
    const cy = layer.y + layer.height / 2;
    await ui.page.mouse.move(cx - 60, cy - 40);
    await ui.page.mouse.down();
    await ui.page.mouse.move(cx, cy, { steps: 5 });
    await ui.page.mouse.move(cx + 60, cy + 40, { steps: 5 });
    await ui.page.mouse.up();
    await ui.page.getByTestId('draw-finding-box').waitFor(WAIT);
    await ui.page.getByTestId('draw-finding-label').selectOption('tumor_detected');
    await ui.screenshot('reader-finding-drawn');
    await ui.page.getByTestId('draw-finding-add').click();
    await expect.poll(() => ui.page.getByTestId('finding').count(), WAIT).toBe(2);
    expect(await ui.page.getByTestId('finding').filter({ hasText: 'drawn by reader' }).count()).toBe(1);

    const results = async () => (await t.request('GET', `/v1/scans/${image.scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data.findings as ApiFinding[];
    const drawn = (await results()).find((f) => f.source === 'reader')!;
    expect(drawn).toMatchObject({ label: 'tumor_detected', review: 'accepted' });
    // A box around the middle of the 128-pixel image, wider than tall as drawn (120 x 80 CSS px).
    expect(drawn.location.x).toBeGreaterThan(20);
    expect(drawn.location.x + drawn.location.width).toBeLessThan(108);
    expect(drawn.location.width / drawn.location.height).toBeCloseTo(1.5, 0);
    expect(drawn.place.width_mm).toBeCloseTo(drawn.location.width * 0.661468, 1);

    // Reject the model's infarct and say why.
    const infarct = ui.page.getByTestId('finding').filter({ hasText: /infarct/i });
    await infarct.click();
    await infarct.getByTestId('reject-finding').click();
    await expect.poll(() => infarct.getAttribute('data-review'), WAIT).toBe('rejected');
    await infarct.getByTestId('reject-reason').fill('Beam-hardening artefact at the skull base.');
    await infarct.getByTestId('save-reject-reason').click();
    await expect.poll(async () => (await results()).find((f) => f.label === 'infarct_detected')!.review_reason, WAIT).toBe('Beam-hardening artefact at the skull base.');
    await ui.screenshot('reader-finding-viewer');

    // The report: the reader's tumour in mm, the rejection with its reason.
    expect((await t.request('POST', '/v1/reports', { key: reader.key, body: { scan_id: image.scanId } })).status).toBe(201);
    await ui.openReport(image.scanId);
    await ui.page.getByTestId('report-lesions').waitFor(WAIT);
    const tumourRow = await ui.page.getByTestId('report-lesion').filter({ hasText: /tumou?r/i }).textContent();
    expect(tumourRow).toContain('drawn by reader');
    expect(tumourRow).toMatch(/\d+(\.\d)? × \d+(\.\d)? mm/);
    expect(await ui.page.getByTestId('report-lesion').filter({ hasText: /infarct/i }).textContent()).toContain('rejected: Beam-hardening artefact at the skull base.');
    const impression = await ui.page.getByTestId('impression').inputValue();
    expect(impression).toMatch(/^Findings accepted on review, AI and reader-drawn/);
    expect(impression).toMatch(/: \d+(\.\d)? × \d+(\.\d)? mm, slice 1 of 1 \(added by the reader\)\./);
    await ui.screenshot('reader-finding-report');
  }, 60_000);

  it('after the report is final, a drawn finding goes in a signed addendum', async () => {
    const image = await seedImportedInstance(t, '/usr/lib/python3/dist-packages/pydicom/data/test_files/MR_small.dcm');
    const { db } = t.server.services;
    const scanRef = ((await db.get('SELECT id FROM scans WHERE scan_id = ?', [image.scanId])) as { id: number }).id;
    await seedAnalysis(db, { scanId: image.scanId, patientId: '', studyUid: '', scanRef }, [
      { label: 'infarct_detected', confidence: 0.7, x: 2, y: 2, width: 10, height: 10, instanceUid: image.instanceUid },
    ]);
    const reader = await t.keyFor('radiologist', { email: 'dr.final@hospital.test' });
    const report = (await t.request('POST', '/v1/reports', { key: reader.key, body: { scan_id: image.scanId } })).json.data;
    expect((await t.request('PATCH', `/v1/reports/${report.id}`, { key: reader.key, body: { status: 'final' } })).status).toBe(200);

    const ui = await openUi(browser, t.url);
    await ui.signIn(reader.key);
    await ui.openScan(image.scanId);
    await expect.poll(() => ui.page.getByTestId('finding').count(), WAIT).toBe(1);
    await ui.page.getByText('Loading image').waitFor({ state: 'hidden', ...WAIT });
    await ui.page.getByTestId('draw-finding').click();
    const layer = (await ui.page.getByTestId('draw-finding-layer').boundingBox())!;
    const cx = layer.x + layer.width / 2;
    const cy = layer.y + layer.height / 2;
    await ui.page.mouse.move(cx - 40, cy - 40);
    await ui.page.mouse.down();
    await ui.page.mouse.move(cx + 40, cy + 40, { steps: 5 });
    await ui.page.mouse.up();
    await ui.page.getByTestId('draw-finding-label').selectOption('tumor_detected');
    await ui.page.getByTestId('draw-finding-add').click();
    await expect.poll(() => ui.page.getByTestId('finding').count(), WAIT).toBe(2);
    await ui.screenshot('reader-finding-addendum-viewer');

    const signed = (await t.request('GET', `/v1/reports/${report.id}`, { key: reader.key })).json.data;
    expect(signed.findings).toHaveLength(1);
    expect(signed.addenda).toHaveLength(1);
    expect(signed.addenda[0]).toMatchObject({ text: 'Finding added in the viewer after signing: Mass / tumour.', author: { email: 'dr.final@hospital.test' } });
    expect(signed.addenda[0].finding_changes[0]).toMatchObject({ label: 'tumor_detected', added: true, to: 'accepted' });
    await ui.openReport(image.scanId);
    await expect.poll(() => ui.page.getByTestId('addendum-change').first().textContent(), WAIT).toContain('added by the reader, accepted');
    await ui.screenshot('reader-finding-addendum-report');
  }, 60_000);
});
