/**
 * The viewer's display tools (issue 11, reading tools) in Debian's Chromium against the real
 * server: on pydicom's CT_small.dcm (axial, Image Orientation 1\0\0\0\1\0, Pixel Spacing
 * 0.661468 mm) the scale bar's drawn length matches its label, the orientation markers read
 * R/L/A/P and follow rotate and flip, invert and rotate change the canvas pixels as they say,
 * the four corners carry patient, study, series, slice, position, window and zoom; on a phantom
 * series cine playback walks the stack.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { CT_SMALL, seedImportedInstance } from '../helpers/image-fixture.ts';
import { readPng, type Png } from '../helpers/png.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { makePhantoms } from '../imports/helpers.ts';
import { enhancedCt } from '../helpers/enhanced.ts';

const WAIT = { timeout: 10_000 };
const SPACING_MM = 0.661468;
const SEED = 20011201;

let t: TestServer;
let browser: Browser;
let work: string;
let ctScan = '';
let stackScan = '';
let otherScan = '';

beforeAll(async () => {
  ensureRendererBuilt();
  work = mkdtempSync(join(tmpdir(), 'mia-display-tools-'));
  makePhantoms(join(work, 'phantoms'), { series: 1, seed: SEED, size: 64, slices: 8, modality: 'CT' });
  t = await startTestServer({ uiDir: UI_DIR });
  ctScan = (await seedImportedInstance(t, CT_SMALL)).scanId;
  const dir = join(work, 'phantoms', `series-${SEED}-CT`);
  for (const name of readdirSync(dir)) stackScan = (await seedImportedInstance(t, join(dir, name))).scanId;
  // A second series of the same patient and study (the stack as one Enhanced CT file): the
  // viewer's series strip offers it beside the classic one.
  enhancedCt(dir, join(work, 'enhanced.dcm'), {});
  otherScan = (await seedImportedInstance(t, join(work, 'enhanced.dcm'))).scanId;
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

async function canvasPng(ui: Ui): Promise<Png> {
  // Let the draw effect of the last key run first.
  await ui.page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
  const url = (await ui.page.evaluate(`document.querySelector('[data-testid="viewport-canvas"]').toDataURL()`)) as string;
  return readPng(Buffer.from(url.slice(url.indexOf(',') + 1), 'base64'));
}

const grey = (png: Png, x: number, y: number): number => png.pixels[(Math.round(y) * png.width + Math.round(x)) * png.channels] ?? 0;

async function markers(ui: Ui): Promise<string[]> {
  return Promise.all(['left', 'right', 'top', 'bottom'].map((edge) => ui.page.getByTestId(`orient-${edge}`).textContent().then((s) => s ?? '')));
}

async function openCt(): Promise<Ui> {
  const ui = await openUi(browser, t.url);
  await ui.signIn(t.adminKey);
  await ui.openScan(ctScan);
  await expect.poll(() => ui.page.getByTestId('viewport-canvas').getAttribute('data-rendered-slice'), WAIT).toBe('0');
  return ui;
}

describe('display tools', () => {
  it('draws a scale bar whose length on screen is its label at the pixel spacing, also when zoomed', async () => {
    const ui = await openCt();
    const canvas = ui.page.getByTestId('viewport-canvas');
    for (const zoomKey of ['', '+', '+']) {
      if (zoomKey) await ui.page.keyboard.press(zoomKey);
      const scale = Number(await canvas.getAttribute('data-scale'));
      const label = (await ui.page.getByTestId('scale-bar').getAttribute('data-mm-label')) ?? '';
      const [value, unit] = label.split(' ');
      const mm = Number(value) * (unit === 'cm' ? 10 : 1);
      const line = (await ui.page.getByTestId('scale-bar-line').boundingBox())!;
      // Screen pixels per mm: screen pixels per image column over the column spacing.
      const expected = (mm * scale) / SPACING_MM;
      expect(Math.abs(line.width - expected), `${label}: ${line.width} px, expected ${expected}`).toBeLessThan(1);
      expect(line.width).toBeGreaterThan(20);
    }
    await ui.screenshot('display-scale-bar');
    await ui.page.context().close();
  });

  it('puts R/L/A/P on the edges of an axial image and turns and mirrors them with the image', async () => {
    // The instance API gives Image Orientation (Patient), which the markers are read from.
    const instances = (await t.request('GET', `/v1/scans/${ctScan}/instances`)).json.data.items as { image_orientation: number[] | null }[];
    expect(instances[0]!.image_orientation).toEqual([1, 0, 0, 0, 1, 0]);
    const ui = await openCt();
    expect(await markers(ui)).toEqual(['R', 'L', 'A', 'P']);
    await ui.screenshot('display-markers-axial');
    const before = await canvasPng(ui);

    // A quarter turn clockwise: the patient's left (image right) is now at the bottom.
    await ui.page.keyboard.press('t');
    await expect.poll(() => markers(ui), WAIT).toEqual(['P', 'A', 'R', 'L']);
    const turned = await canvasPng(ui);
    await ui.screenshot('display-markers-rotated');
    // The canvas is the image turned about its centre: screen (dx, dy) from the centre shows what
    // (dy, -dx) showed before. Sampled over the image, not where it was (which differs).
    const cx = before.width / 2;
    const cy = before.height / 2;
    const reach = Math.min(before.width, before.height) * 0.4;
    let same = 0;
    let unmoved = 0;
    let n = 0;
    for (let dy = -reach; dy <= reach; dy += reach / 10) {
      for (let dx = -reach; dx <= reach; dx += reach / 10) {
        same += Math.abs(grey(turned, cx + dx, cy + dy) - grey(before, cx + dy, cy - dx));
        unmoved += Math.abs(grey(turned, cx + dx, cy + dy) - grey(before, cx + dx, cy + dy));
        n++;
      }
    }
    // Samples land up to a screen pixel apart (the centre falls between pixels), so edges in the
    // image leave a few levels of difference; the unturned picture differs by a hundred.
    expect(same / n, `turned vs rotated original ${same / n}, vs unmoved ${unmoved / n}`).toBeLessThan(10);
    expect(unmoved / n).toBeGreaterThan(50);

    // Flip left-right after the turn: a mirror on screen, whatever the rotation.
    await ui.page.keyboard.press('h');
    await expect.poll(() => markers(ui), WAIT).toEqual(['A', 'P', 'R', 'L']);
    await ui.page.keyboard.press('v');
    await expect.poll(() => markers(ui), WAIT).toEqual(['A', 'P', 'L', 'R']);
    await ui.screenshot('display-markers-flipped');
    // Mirrored both ways is a half turn; a third quarter turn makes it whole: the stored orientation.
    await ui.page.keyboard.press('t');
    await expect.poll(() => markers(ui), WAIT).toEqual(['R', 'L', 'A', 'P']);
    const back = await canvasPng(ui);
    let diff = 0;
    for (let k = 0; k < 400; k++) {
      const x = cx + ((k % 20) - 10) * (reach / 10);
      const y = cy + (Math.floor(k / 20) - 10) * (reach / 10);
      diff += Math.abs(grey(back, x, y) - grey(before, x, y));
    }
    expect(diff / 400).toBeLessThan(1);
    await ui.page.context().close();
  });

  it('inverts the grey scale (i) and lists the tools in the help', async () => {
    const ui = await openCt();
    const before = await canvasPng(ui);
    await ui.page.keyboard.press('i');
    await expect.poll(() => ui.page.getByTestId('window-readout').textContent(), WAIT).toContain('inverted');
    const inverted = await canvasPng(ui);
    const cx = before.width / 2;
    const cy = before.height / 2;
    let worst = 0;
    for (let k = -10; k <= 10; k++) worst = Math.max(worst, Math.abs(grey(inverted, cx + k * 7, cy + k * 3) - (255 - grey(before, cx + k * 7, cy + k * 3))));
    expect(worst).toBeLessThanOrEqual(1);
    await ui.screenshot('display-inverted');
    const help = (await ui.page.getByTestId('kbd-help').textContent()) ?? '';
    for (const entry of ['i invert', 't rotate', 'h/v flip', 'c cine']) expect(help).toContain(entry);
    await ui.page.context().close();
  });

  it('shows the four corners: patient, study, series; slice and position; window and zoom', async () => {
    const ui = await openCt();
    const scan = (await t.request('GET', `/v1/scans/${ctScan}`)).json.data as { patient_id: string; series_number: number | null };
    // The name (PHI) comes from the audited tags endpoint: CompressedSamples^CT1.
    await expect.poll(() => ui.page.getByTestId('patient-name').textContent(), WAIT).toBe('CompressedSamples, CT1 · ');
    const tl = (await ui.page.getByTestId('overlay-tl').textContent()) ?? '';
    expect(tl).toContain(scan.patient_id);
    expect(tl).toContain('2004-01-19');
    expect(tl).toContain(`Series ${scan.series_number ?? '—'}`);
    const tr = (await ui.page.getByTestId('slice-number').textContent()) ?? '';
    expect(tr).toMatch(/Slice 1 \/ 1.*Pos -?\d+\.\d mm/);
    const bl = (await ui.page.getByTestId('window-readout').textContent()) ?? '';
    expect(bl).toMatch(/W \d+ \/ L -?\d+ · Default.*Zoom \d+%/);
    await ui.screenshot('display-corners');
    await ui.page.context().close();
  });

  it('plays the stack as cine at the chosen rate, and pauses', async () => {
    const ui = await openUi(browser, t.url);
    await ui.signIn(t.adminKey);
    await ui.openScan(stackScan);
    const canvas = ui.page.getByTestId('viewport-canvas');
    await expect.poll(() => canvas.getAttribute('data-rendered-slice'), WAIT).not.toBe('');
    await ui.page.getByTestId('cine-fps').selectOption('20');
    await ui.page.getByTestId('cine-play').click();
    const seen = new Set<string>();
    const started = Date.now();
    while (Date.now() - started < 1500) {
      seen.add((await canvas.getAttribute('data-rendered-slice')) ?? '');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await ui.screenshot('display-cine');
    // 8 slices at 20 fps for 1.5 s: round the loop more than once, every slice drawn.
    expect([...seen].filter((s) => s !== '').length).toBe(8);
    await ui.page.keyboard.press('c');
    await expect.poll(() => ui.page.getByTestId('cine-play').textContent(), WAIT).toContain('Cine');
    const stopped = await canvas.getAttribute('data-slice-index');
    await new Promise((resolve) => setTimeout(resolve, 400));
    expect(await canvas.getAttribute('data-slice-index')).toBe(stopped);
    await ui.page.context().close();
  });

  it('browses the DICOM tags of the image shown, filtered, and the read is audited', async () => {
    const ui = await openCt();
    await ui.page.getByTestId('open-tags').click();
    await ui.page.getByTestId('tag-browser').waitFor();
    const row = (tag: string) => ui.page.locator(`[data-testid="tag-row"][data-tag="${tag}"]`);
    await expect.poll(() => row('(0010,0010)').textContent(), WAIT).toContain('CompressedSamples^CT1');
    expect(await row('(0028,0030)').textContent()).toContain('0.661468\\0.661468');
    await ui.page.getByTestId('tag-filter').fill('orientation');
    await expect.poll(() => ui.page.getByTestId('tag-row').count(), WAIT).toBe(1);
    expect(await row('(0020,0037)').textContent()).toContain('Image Orientation (Patient)');
    await ui.screenshot('display-tag-browser');
    await ui.page.getByTestId('tag-close').click();
    await expect.poll(() => ui.page.getByTestId('tag-browser').count(), WAIT).toBe(0);
    const audit = await t.request('GET', '/v1/audit?action=instances.tags&patient_id=1CT1');
    expect((audit.json.data.items as unknown[]).length).toBeGreaterThanOrEqual(1);
    await ui.page.context().close();
  });

  it("shows the patient's series as thumbnails under the viewer and opens one on click", async () => {
    const ui = await openUi(browser, t.url);
    await ui.signIn(t.adminKey);
    await ui.openScan(stackScan);
    const items = ui.page.getByTestId('series-item');
    await expect.poll(() => items.count(), WAIT).toBe(2);
    const current = ui.page.locator('[data-testid="series-item"][aria-current="true"]');
    expect(await current.getAttribute('data-scan-id')).toBe(stackScan);
    // Each thumbnail is loaded (the server's 128 px scan thumbnail).
    const loaded = `[...document.querySelectorAll('[data-testid="series-item"] img')].filter((img) => img.complete && img.naturalWidth > 0).length`;
    await expect.poll(() => ui.page.evaluate(loaded), WAIT).toBe(2);
    await ui.screenshot('display-series-strip');
    await ui.page.locator(`[data-testid="series-item"][data-scan-id="${otherScan}"]`).click();
    await expect.poll(() => ui.page.getByTestId('viewer').getAttribute('data-scan-id'), WAIT).toBe(otherScan);
    await expect.poll(() => current.getAttribute('data-scan-id'), WAIT).toBe(otherScan);
    await ui.page.context().close();
  });
});
