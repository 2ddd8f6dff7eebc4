/**
 * Issue 16, item 3, in Debian's Chromium: a segmentation model's finding is drawn as a
 * translucent mask over its region on its slice (tinted in its box's colour, the tissue still
 * showing through), and hidden with the boxes. The mask is a disc on pydicom's CT_small.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RleMask } from '#common/rle-mask.ts';
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

/** A filled disc of radius r centred in a (2r+1)-square box at (x, y), as RLE. */
function disc(x: number, y: number, r: number): RleMask {
  const side = 2 * r + 1;
  const counts: number[] = [];
  let inside = false;
  let run = 0;
  for (let row = 0; row < side; row++) {
    for (let col = 0; col < side; col++) {
      const now = (row - r) ** 2 + (col - r) ** 2 <= r * r;
      if (now !== inside) {
        counts.push(run);
        run = 0;
        inside = now;
      }
      run += 1;
    }
  }
  counts.push(run);
  if (inside) counts.push(0);
  return { encoding: 'rle', x, y, width: side, height: side, counts };
}

type Rgb = [number, number, number];

describe('segmentation overlay', () => {
  it('tints the mask region on its slice and hides it with the boxes', async () => {
    const image = await seedImportedInstance(t);
    const { db } = t.server.services;
    const row = (await db.get('SELECT s.id, p.patient_id, st.study_uid FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [image.scanId])) as {
      id: number;
      patient_id: string;
      study_uid: string;
    };
    const mask = disc(40, 50, 12);
    await seedAnalysis(db, { scanId: image.scanId, patientId: row.patient_id, studyUid: row.study_uid, scanRef: row.id }, [
      { instanceUid: image.instanceUid, frame: 0, label: 'tumor_detected', confidence: 0.9, x: mask.x, y: mask.y, width: mask.width, height: mask.height, mask },
    ]);
    const served = (await t.request('GET', `/v1/scans/${image.scanId}/results`, { headers: { 'API-Version': '1.1' } })).json.data.findings;
    expect(served[0].mask).toEqual(mask);

    const ui = await openUi(browser, t.url);
    await ui.signIn(t.adminKey);
    await ui.openScan(image.scanId);
    const canvas = ui.page.getByTestId('viewport-canvas');
    await expect.poll(() => canvas.getAttribute('data-rendered-slice'), WAIT).toBe('0');
    await expect.poll(() => canvas.getAttribute('data-masks-drawn'), WAIT).toBe('1');
    await ui.page.getByText('Loading image').waitFor({ state: 'hidden', ...WAIT });

    /** The canvas's colour at image pixel (x, y), through the viewer's own transform. */
    // Page code as a string, as the other canvas tests write it (this project's tsconfig has no DOM types).
    const colourAt = async (x: number, y: number): Promise<Rgb> =>
      (await ui.page.evaluate(`(() => {
        const c = document.querySelector('[data-testid="viewport-canvas"]');
        const ratio = c.width / c.clientWidth;
        const sx = (Number(c.dataset.offsetX) + ${x} * Number(c.dataset.scale)) * ratio;
        const sy = (Number(c.dataset.offsetY) + ${y} * Number(c.dataset.scaleY)) * ratio;
        const d = c.getContext('2d').getImageData(Math.round(sx), Math.round(sy), 1, 1).data;
        return [d[0], d[1], d[2]];
      })()`)) as Rgb;
    const centre = { x: 40 + 12.5, y: 50 + 12.5 };
    const outside = { x: 100.5, y: 100.5 };
    const inMask = await colourAt(centre.x, centre.y);
    const beside = await colourAt(outside.x, outside.y);
    await ui.screenshot('segmentation-overlay');

    await ui.page.keyboard.press('b');
    await expect.poll(() => canvas.getAttribute('data-masks-drawn'), WAIT).toBe('0');
    const bare = await colourAt(centre.x, centre.y);
    // The greyscale image: no tint. Under the mask: the finding's box colour (the only finding
    // is the current one, #00e5ff) at 35% over the tissue, which still shows through.
    expect(Math.abs(bare[0] - bare[2])).toBeLessThan(3);
    const cyan: Rgb = [0x00, 0xe5, 0xff];
    inMask.forEach((v, i) => expect(Math.abs(v - (0.65 * bare[i]! + 0.35 * cyan[i]!)), `channel ${i}: ${inMask.join(',')} over ${bare.join(',')}`).toBeLessThan(8));
    // Outside the mask nothing is tinted.
    expect(Math.abs(beside[0] - beside[2])).toBeLessThan(3);

    await ui.page.keyboard.press('b');
    await expect.poll(() => canvas.getAttribute('data-masks-drawn'), WAIT).toBe('1');
  }, 60_000);
});
