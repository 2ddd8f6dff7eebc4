/**
 * Orientation markers of an Enhanced multi-frame image follow each frame's own plane (issue 11):
 * a frame with its own Plane Orientation item (PS3.3 C.7.6.16.2.4) is not labelled with the first
 * frame's directions. Built from a phantom CT by enhanced_ct.py --tilt-frame: frame 1's columns
 * run (0, 0.8, 0.6), posterior and towards the head, where the other frames' run posterior.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR } from '../helpers/browser.ts';
import { enhancedCt } from '../helpers/enhanced.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { makePhantoms } from '../imports/helpers.ts';

const WAIT = { timeout: 10_000 };
const SEED = 20260303;

let t: TestServer;
let browser: Browser;
let work: string;
let scanId = '';

beforeAll(async () => {
  ensureRendererBuilt();
  work = mkdtempSync(join(tmpdir(), 'mia-frame-orientation-'));
  makePhantoms(join(work, 'phantoms'), { series: 1, seed: SEED, size: 64, slices: 6, modality: 'CT' });
  enhancedCt(join(work, 'phantoms', `series-${SEED}-CT`), join(work, 'tilted.dcm'), { tiltFrame: true });
  t = await startTestServer({ uiDir: UI_DIR });
  scanId = (await seedImportedInstance(t, join(work, 'tilted.dcm'))).scanId;
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

type FrameValue = { position: number | null; image_orientation?: number[] | null };

describe('per-frame orientation markers', () => {
  it("labels each frame's edges from its own Image Orientation (Patient)", async () => {
    const instance = (await t.request('GET', `/v1/scans/${scanId}/instances`)).json.data.items[0] as { frame_values: FrameValue[] };
    expect(instance.frame_values[1]!.image_orientation).toEqual([1, 0, 0, 0, 0.8, 0.6]);
    expect(instance.frame_values[0]!.image_orientation).toEqual([1, 0, 0, 0, 1, 0]);
    // The viewer's stack: frames by their own positions (renderer/src/imaging/stack.ts).
    const order = [...instance.frame_values.keys()].sort((a, b) => (instance.frame_values[a]!.position ?? 0) - (instance.frame_values[b]!.position ?? 0));
    const ui = await openUi(browser, t.url);
    await ui.signIn(t.adminKey);
    await ui.openScan(scanId);
    const edges = () => Promise.all(['left', 'right', 'top', 'bottom'].map((edge) => ui.page.getByTestId(`orient-${edge}`).textContent()));
    await ui.page.keyboard.press('Home');
    for (let at = 0; at < order.length; at++) {
      if (at > 0) await ui.page.keyboard.press('ArrowDown');
      await expect.poll(() => ui.page.getByTestId('viewport-canvas').getAttribute('data-slice-index'), WAIT).toBe(String(at));
      // Frame 1: down is (0, 0.8, 0.6), posterior then head: PH at the bottom, AF at the top.
      const expected = order[at] === 1 ? ['R', 'L', 'AF', 'PH'] : ['R', 'L', 'A', 'P'];
      await expect.poll(edges, WAIT).toEqual(expected);
      if (order[at] === 1) await ui.screenshot('frame-orientation-tilted');
    }
    await ui.page.context().close();
  });
});
