/**
 * The viewer on an Enhanced CT multi-frame image (issue 11, item 1), in Debian's Chromium against
 * the real server and the built renderer: a phantom series imported both as classic slices and
 * as one Enhanced CT file whose frames are stored interleaved (even slices first) with their
 * rescale varying per frame, all of it only in the functional groups. Scrolling the Enhanced
 * image must walk the slices in space, and each drawn slice must be the classic one's pixels.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { enhancedCt, type EnhancedCt } from '../helpers/enhanced.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { seedAnalysis } from '../helpers/seed.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { makePhantoms } from '../imports/helpers.ts';

const SEED = 20006601;
const WAIT = { timeout: 10_000 };

let t: TestServer;
let browser: Browser;
let work: string;
let classicScan = '';
let enhanced: EnhancedCt;
let short: EnhancedCt;

/** The canvas's own pixels (overlay text is not part of it), as a data URL. */
const canvasPixels = (ui: Ui): Promise<string> =>
  ui.page.evaluate(`document.querySelector('[data-testid="viewport-canvas"]').toDataURL()`) as Promise<string>;

async function showSlice(ui: Ui, index: number): Promise<void> {
  // A string expression: the test project has no DOM types. Sets the slider as a drag does.
  await ui.page.evaluate(`(() => {
    const input = document.querySelector('[data-testid="slice-slider"]');
    const setter = Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set;
    setter.call(input, '${index}');
    input.dispatchEvent(new Event('input', { bubbles: true }));
  })()`);
  await expect.poll(() => ui.page.getByTestId('viewport-canvas').getAttribute('data-slice-index'), WAIT).toBe(String(index));
}

beforeAll(async () => {
  ensureRendererBuilt();
  work = mkdtempSync(join(tmpdir(), 'mia-enhanced-viewer-'));
  makePhantoms(join(work, 'classic'), { series: 1, seed: SEED, size: 64, slices: 6, modality: 'CT' });
  const classicDir = join(work, 'classic', `series-${SEED}-CT`);
  enhanced = enhancedCt(classicDir, join(work, 'enhanced.dcm'), { interleave: true, perFrameIntercept: true });
  t = await startTestServer({ uiDir: UI_DIR });
  for (const name of readdirSync(classicDir)) classicScan = (await seedImportedInstance(t, join(classicDir, name))).scanId;
  await seedImportedInstance(t, join(work, 'enhanced.dcm'));
  short = enhancedCt(classicDir, join(work, 'short.dcm'), { dropLastItem: true });
  await seedImportedInstance(t, join(work, 'short.dcm'));
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe('Enhanced CT in the viewer', () => {
  it('scrolls the interleaved frames in spatial order, each drawn as its classic slice', async () => {
    const classicUi = await openUi(browser, t.url);
    await classicUi.signIn(t.adminKey);
    await classicUi.openScan(classicScan);
    const ui = await openUi(browser, t.url);
    await ui.signIn(t.adminKey);
    await ui.openScan(enhanced.series_uid);
    const count = enhanced.frames;
    // Frame k was made from classic slice enhanced.classic[k]; the classic scan lists slices by position.
    const classicOrder = ((await t.request('GET', `/v1/scans/${classicScan}/instances`)).json.data.items as { instance_uid: string }[]).map((i) => i.instance_uid);
    let previous = '';
    for (let index = 0; index < count; index++) {
      const frame = enhanced.classic.indexOf(classicOrder[index]!);
      await showSlice(classicUi, index);
      await showSlice(ui, index);
      await expect.poll(() => ui.page.getByTestId('slice-number').textContent(), WAIT).toContain(`(frame ${frame + 1})`);
      // Frames load asynchronously: poll until both canvases show this slice (not the last one) alike.
      await expect
        .poll(async () => {
          const [mine, theirs] = [await canvasPixels(ui), await canvasPixels(classicUi)];
          return mine === theirs && mine !== previous ? 'same new slice' : 'not yet';
        }, WAIT)
        .toBe('same new slice');
      previous = await canvasPixels(ui);
      if (index === 1) {
        await ui.screenshot('enhanced-ct-slice-2');
        await classicUi.screenshot('enhanced-ct-classic-slice-2');
      }
    }
  }, 120_000);

  it('says when the frames\' own values could not be read, and shows none of that on a good file', async () => {
    const ui = await openUi(browser, t.url);
    await ui.signIn(t.adminKey);
    await ui.openScan(enhanced.series_uid);
    await expect.poll(() => ui.page.getByTestId('viewport-canvas').getAttribute('data-slice-index'), WAIT).not.toBeNull();
    expect(await ui.page.getByTestId('frames-problem').count()).toBe(0);
    await ui.openScan(short.series_uid);
    const notice = ui.page.getByTestId('frames-problem');
    await notice.waitFor(WAIT);
    expect(await notice.textContent()).toContain('Per-frame Functional Groups Sequence (5200,9230) has 5 item(s) for 6 frame(s)');
    await ui.screenshot('enhanced-ct-frames-problem');
  }, 60_000);

  it('the report names a finding by the viewer\'s slice number, in space, not by frame number', async () => {
    const row = (await t.server.services.db.get('SELECT s.id AS scanRef, p.patient_id AS patientId, st.study_uid AS studyUid FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [enhanced.series_uid])) as { scanRef: number; patientId: string; studyUid: string };
    // Frame 4 (index 3) of the interleaved file is the second slice from the bottom.
    await seedAnalysis(t.server.services.db, { scanId: enhanced.series_uid, ...row }, [{ instanceUid: enhanced.instance_uid, frame: 3, confidence: 0.9 }]);
    const [finding] = (await t.request('GET', `/v1/scans/${enhanced.series_uid}/results`, { headers: { 'API-Version': '1.1' } })).json.data.findings;
    expect((await t.request('PATCH', `/v1/findings/${finding.id}`, { body: { review: 'accepted' } })).status).toBe(200);
    const ui = await openUi(browser, t.url);
    await ui.signIn(t.adminKey);
    await ui.openReport(enhanced.series_uid);
    await ui.page.getByTestId('draft-report').click();
    await ui.page.getByTestId('impression-suggested').waitFor(WAIT);
    expect(await ui.page.getByTestId('impression').inputValue()).toContain('slice 2 of 6 (AI confidence 90%)');
  }, 60_000);
});
