/**
 * One windowing definition on both sides (issue 11), in Debian's Chromium against the real
 * server: for pydicom's CT_small.dcm, each CT preset drawn by the viewer's canvas has the pixels
 * of the server's rendered PNG with the same window (the bone preset was 600/2800 in the
 * renderer and 400/1800 on the server), and the viewer's Default is the server's default.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CT_WINDOW_PRESETS, type Window } from '#common/windowing.ts';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { CT_SMALL, seedImportedInstance } from '../helpers/image-fixture.ts';
import { readPng, type Png } from '../helpers/png.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

const WAIT = { timeout: 10_000 };

let t: TestServer;
let browser: Browser;
let scanId = '';
let instanceUid = '';

beforeAll(async () => {
  ensureRendererBuilt();
  t = await startTestServer({ uiDir: UI_DIR });
  ({ scanId, instanceUid } = await seedImportedInstance(t, CT_SMALL));
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

/** The server's rendered frame, with `win` or its default window. */
async function serverPng(win: Window | null): Promise<Png> {
  const query = win ? `?window_center=${win.center}&window_width=${win.width}` : '';
  const reply = await fetch(`${t.url}/v1/instances/${instanceUid}/frames/0/rendered${query}`, { headers: { Authorization: `Bearer ${t.adminKey}` } });
  expect(reply.status).toBe(200);
  return readPng(Buffer.from(await reply.arrayBuffer()));
}

/** The canvas's own pixels (no overlay text), at device pixels. */
async function canvasPng(ui: Ui): Promise<Png> {
  const url = (await ui.page.evaluate(`document.querySelector('[data-testid="viewport-canvas"]').toDataURL()`)) as string;
  return readPng(Buffer.from(url.slice(url.indexOf(',') + 1), 'base64'));
}

/**
 * Compares the canvas with the server's PNG at the centre of every image pixel on screen. The
 * canvas interpolates (smoothing on; Skia may use a cubic filter when magnifying, whose weight at
 * a pixel's own centre is about 0.8), so the view is zoomed until an image pixel is tens of screen
 * pixels wide, and a pixel may differ from the server's by a level or two plus a quarter of the
 * range of its 3 x 3 neighbourhood; where that neighbourhood is flat it must be equal within 2.
 */
async function compare(ui: Ui, server: Png): Promise<{ samples: number; flat: number; maxDiff: number; meanDiff: number }> {
  const canvas = ui.page.getByTestId('viewport-canvas');
  const scale = Number(await canvas.getAttribute('data-scale'));
  const scaleY = Number(await canvas.getAttribute('data-scale-y'));
  const offsetX = Number(await canvas.getAttribute('data-offset-x'));
  const offsetY = Number(await canvas.getAttribute('data-offset-y'));
  const shot = await canvasPng(ui);
  const box = (await canvas.boundingBox())!;
  const ratio = shot.width / box.width;
  let samples = 0;
  let maxDiff = 0;
  let total = 0;
  let flat = 0;
  const grey = (x: number, y: number): number =>
    server.pixels[(Math.min(server.height - 1, Math.max(0, y)) * server.width + Math.min(server.width - 1, Math.max(0, x))) * server.channels] ?? 0;
  for (let y = 0; y < server.height; y++) {
    for (let x = 0; x < server.width; x++) {
      const sx = Math.floor((offsetX + (x + 0.5) * scale) * ratio);
      const sy = Math.floor((offsetY + (y + 0.5) * scaleY) * ratio);
      // Skip pixels near the canvas edge; a pixel's centre must be well inside the canvas.
      if (sx < 2 || sy < 2 || sx >= shot.width - 2 || sy >= shot.height - 2) continue;
      const drawn = shot.pixels[(sy * shot.width + sx) * shot.channels] ?? 0;
      const expected = server.pixels[(y * server.width + x) * server.channels] ?? 0;
      const around = [-1, 0, 1].flatMap((dy) => [-1, 0, 1].map((dx) => grey(x + dx, y + dy)));
      const range = Math.max(...around) - Math.min(...around);
      if (range === 0) flat++;
      const diff = Math.abs(drawn - expected);
      // The excess over what interpolation can explain at this pixel.
      maxDiff = Math.max(maxDiff, diff - 0.25 * range);
      total += diff;
      samples++;
    }
  }
  return { samples, flat, maxDiff, meanDiff: total / Math.max(1, samples) };
}

describe('windowing in the viewer and the server', () => {
  it('draws every CT preset, and the default, as the server renders it', async () => {
    const ui = await openUi(browser, t.url);
    await ui.signIn(t.adminKey);
    await ui.openScan(scanId);
    const canvas = ui.page.getByTestId('viewport-canvas');
    await expect.poll(() => canvas.getAttribute('data-rendered-slice'), WAIT).toBe('0');
    // Zoom so that one image pixel covers many screen pixels (see compare()).
    const fitScale = Number(await canvas.getAttribute('data-scale'));
    while (Number(await canvas.getAttribute('data-scale')) < 40 && Number(await canvas.getAttribute('data-scale')) < fitScale * 16) {
      await ui.page.keyboard.press('+');
    }
    const zoomed = Number(await canvas.getAttribute('data-scale'));
    expect(zoomed).toBeGreaterThan(30);

    const checks: { name: string; win: Window | null; key: string }[] = [
      { name: 'Default', win: null, key: '1' },
      ...CT_WINDOW_PRESETS.map((p, i) => ({ name: p.label, win: { center: p.center, width: p.width }, key: String(i + 2) })),
    ];
    const readout = ui.page.getByTestId('window-readout');
    for (const check of checks) {
      await ui.page.keyboard.press(check.key);
      if (check.win) await expect.poll(() => readout.textContent(), WAIT).toContain(`W ${check.win.width} / L ${check.win.center} · ${check.name}`);
      else await expect.poll(() => readout.textContent(), WAIT).toContain('· Default');
      // Let the canvas effect of this key press run before reading its pixels.
      await ui.page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
      const server = await serverPng(check.win);
      const result = await compare(ui, server);
      expect(result.samples, check.name).toBeGreaterThan(60);
      // Beyond interpolation, at most 2 levels (the old bone preset differed by tens on bone).
      expect(result.maxDiff, `${check.name}: ${JSON.stringify(result)}`).toBeLessThanOrEqual(2);
      expect(result.meanDiff, `${check.name}: ${JSON.stringify(result)}`).toBeLessThan(1.5);
      if (check.name === 'Bone') await ui.screenshot('windowing-ct-bone');
    }
    // The server's default window is the one the viewer shows as Default (CT_small carries its own).
    await ui.page.keyboard.press('1');
    await ui.screenshot('windowing-ct-default');
  }, 120_000);
});
