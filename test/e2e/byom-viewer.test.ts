/**
 * Bring your own model in Debian's Chromium: the example YOLO-style detector's box is drawn on
 * its slice like any detector's, and the example classifier's finding is shown as what it is, a
 * finding about the whole slice (banner, dashed frame, "no location"), never as a lesion box.
 * Both models are copied into the data folder and run for real on a phantom with a tumour.
 */
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importFolder, phantomDicom, waitForJob, type TruthSeries } from '../analysis/analysis-helpers.ts';
import { REPO_ROOT, SEED_TEST_BASE } from '../analysis/helpers.ts';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

let t: TestServer;
let browser: Browser;
let work: string;
let series: TruthSeries;
const WAIT = { timeout: 15_000 };

type ApiFinding = { id: string; label: string; localization: string; location: { x: number; y: number; width: number; height: number }; instance_uid: string };

beforeAll(async () => {
  ensureRendererBuilt();
  work = mkdtempSync(join(tmpdir(), 'mia-byom-viewer-'));
  [series] = (await phantomDicom(work, 'series', { seed: SEED_TEST_BASE + 7300, series: 1, kinds: 'tumor', size: 128, modality: 'CT' })) as [TruthSeries];
  t = await startTestServer({ uiDir: UI_DIR });
  for (const id of ['mia-example-yolo', 'mia-example-classifier']) cpSync(join(REPO_ROOT, 'example-models', id), join(t.dataDir, 'models', id), { recursive: true });
  await importFolder(t, join(work, 'series'));
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

async function analyseWith(model: string): Promise<ApiFinding[]> {
  expect((await t.request('POST', `/v1/models/${model}/select`, { body: {} })).status).toBeLessThan(300);
  const job = await t.request('POST', `/v1/scans/${series.scan_uid}/analyses`, { body: {} });
  expect((await waitForJob(t, job.json.data.id)).status).toBe('succeeded');
  return (await t.request('GET', `/v1/scans/${series.scan_uid}/results`, { headers: { 'API-Version': '1.1' } })).json.data.findings as ApiFinding[];
}

/** The canvas pixel at an image coordinate, through the viewer's own transform (CSS pixels, ratio 1). */
async function pixelAt(ui: Ui, x: number, y: number): Promise<number[]> {
  await ui.page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
  return (await ui.page.evaluate(`(() => {
    const c = document.querySelector('[data-testid="viewport-canvas"]');
    const sx = Math.round(Number(c.dataset.offsetX) + ${x} * Number(c.dataset.scale));
    const sy = Math.round(Number(c.dataset.offsetY) + ${y} * Number(c.dataset.scaleY));
    return Array.from(c.getContext('2d').getImageData(sx, sy, 1, 1).data);
  })()`)) as number[];
}

async function openFindings(): Promise<Ui> {
  const ui = await openUi(browser, t.url);
  await ui.signIn(t.adminKey);
  await ui.openScan(series.scan_uid);
  await expect.poll(() => ui.page.getByTestId('finding').count(), WAIT).toBeGreaterThan(0);
  await ui.page.getByText('Loading image').waitFor({ state: 'hidden', ...WAIT });
  return ui;
}

describe('example models in the viewer', () => {
  it('draws the YOLO-style box on its slice, and shows the classifier finding as a whole-image finding', async () => {
    const boxes = await analyseWith('mia-example-yolo');
    const box = boxes[0]!;
    expect(box.localization).toBe('box');
    let ui = await openFindings();
    expect(await ui.page.getByTestId('finding').first().getAttribute('data-localization')).toBe('box');
    // The viewer opens on the first finding, current: its box's left edge is drawn in the current colour.
    await expect.poll(() => pixelAt(ui, box.location.x, box.location.y + box.location.height / 2), WAIT).toEqual([0x00, 0xe5, 0xff, 255]);
    expect(await ui.page.getByTestId('image-finding-banner').count()).toBe(0);
    await ui.screenshot('byom-yolo-box');
    await ui.page.context().close();

    const scored = await analyseWith('mia-example-classifier');
    expect(scored).toHaveLength(1);
    expect(scored[0]).toMatchObject({ localization: 'image', label: 'lesion_present', location: { x: 0, y: 0, width: 128, height: 128 } });
    ui = await openFindings();
    const row = ui.page.getByTestId('finding').first();
    expect(await row.getAttribute('data-localization')).toBe('image');
    expect(await row.textContent()).toContain('whole image (no location)');
    const banner = ui.page.getByTestId('image-finding-banner');
    await banner.waitFor(WAIT);
    expect(await banner.textContent()).toMatch(/lesion present \d+%: whole-image finding \(the model scored this slice; it does not say where\)/);
    // Where the detector's box edge was, inside the image, nothing is drawn: no lesion box.
    expect(await pixelAt(ui, box.location.x, box.location.y + box.location.height / 2)).not.toEqual([0x00, 0xe5, 0xff, 255]);
    await ui.screenshot('byom-classifier-banner');
    await ui.page.context().close();
  });
});
