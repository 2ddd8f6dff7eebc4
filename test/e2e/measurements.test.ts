/**
 * Measurement tools (issue 11, reading tools) in Debian's Chromium against the real server, on a
 * CT phantom of known size and HU (measure_phantom.py: Pixel Spacing 0.8\0.5 mm, a 60 x 80 mm
 * block of 40 HU +/- 10 in air): a drawn length is within 1 mm of the truth across and along the
 * non-square pixels, ellipse and rectangle ROIs give the block's mean, SD and the drawn area,
 * the probe reads HU, and everything is kept for the reader and shown again after a reload.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { readPng } from '../helpers/png.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis } from '../helpers/seed.ts';
import { makePhantoms } from '../imports/helpers.ts';

const WAIT = { timeout: 10_000 };
const ROW_MM = 0.8;
const COLUMN_MM = 0.5;

let t: TestServer;
let browser: Browser;
let work: string;
let scanId = '';
let reader = '';
let stackScan = '';
const STACK_SEED = 20261123;

beforeAll(async () => {
  ensureRendererBuilt();
  work = mkdtempSync(join(tmpdir(), 'mia-measure-'));
  const file = join(work, 'phantom.dcm');
  execFileSync('/usr/bin/python3', [join(import.meta.dirname, '..', 'helpers', 'measure_phantom.py'), file]);
  t = await startTestServer({ uiDir: UI_DIR });
  scanId = (await seedImportedInstance(t, file)).scanId;
  // An analysis to report on (a report is drafted from one); its finding is not what is tested.
  const row = (await t.server.services.db.get('SELECT s.id, st.study_uid, p.patient_id FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [scanId])) as { id: number; study_uid: string; patient_id: string };
  await seedAnalysis(t.server.services.db, { scanId, scanRef: row.id, studyUid: row.study_uid, patientId: row.patient_id }, [{}]);
  reader = (await t.keyFor('radiologist')).key;
  makePhantoms(join(work, 'stack'), { series: 1, seed: STACK_SEED, size: 64, slices: 6, modality: 'CT' });
  const stackDir = join(work, 'stack', `series-${STACK_SEED}-CT`);
  for (const name of readdirSync(stackDir)) stackScan = (await seedImportedInstance(t, join(stackDir, name))).scanId;
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

async function openPhantom(): Promise<Ui> {
  const ui = await openUi(browser, t.url);
  await ui.signIn(reader);
  await ui.openScan(scanId);
  await expect.poll(() => ui.page.getByTestId('viewport-canvas').getAttribute('data-rendered-slice'), WAIT).toBe('0');
  return ui;
}

/** Page coordinates of an image point (column, row), from the transform the canvas publishes. */
async function pageAt(ui: Ui, column: number, row: number): Promise<{ x: number; y: number }> {
  const canvas = ui.page.getByTestId('viewport-canvas');
  const box = await canvas.boundingBox();
  if (!box) throw new Error('no canvas');
  const attr = async (name: string) => Number(await canvas.getAttribute(name));
  return { x: box.x + (await attr('data-offset-x')) + column * (await attr('data-scale')), y: box.y + (await attr('data-offset-y')) + row * (await attr('data-scale-y')) };
}

async function drag(ui: Ui, from: [number, number], to: [number, number]): Promise<void> {
  const a = await pageAt(ui, ...from);
  const b = await pageAt(ui, ...to);
  await ui.page.mouse.move(a.x, a.y);
  await ui.page.mouse.down();
  await ui.page.mouse.move((a.x + b.x) / 2, (a.y + b.y) / 2, { steps: 4 });
  await ui.page.mouse.move(b.x, b.y, { steps: 4 });
  await ui.page.mouse.up();
}

type Label = { kind: string; length: number; area: number; mean: number; sd: number; value: number; text: string };

async function labels(ui: Ui): Promise<Label[]> {
  const items = ui.page.getByTestId('measure-label');
  const out: Label[] = [];
  for (let i = 0; i < (await items.count()); i += 1) {
    const item = items.nth(i);
    const n = async (name: string) => Number((await item.getAttribute(name)) ?? NaN);
    out.push({
      kind: (await item.getAttribute('data-kind')) ?? '',
      length: await n('data-length-mm'),
      area: await n('data-area-mm2'),
      mean: await n('data-mean'),
      sd: await n('data-sd'),
      value: await n('data-value'),
      text: (await item.textContent()) ?? '',
    });
  }
  return out;
}

describe('measurement tools', () => {
  it('measures lengths within 1 mm, ROI mean/SD/area and HU on the phantom, and keeps them after a reload', async () => {
    const ui = await openPhantom();
    // The block's edges: columns 40 and 160 (60 mm at 0.5 mm), rows 50 and 150 (80 mm at 0.8 mm).
    await ui.page.getByTestId('measure-length').click();
    await drag(ui, [40, 100], [160, 100]);
    await drag(ui, [100, 50], [100, 150]);
    await expect.poll(async () => (await labels(ui)).length, WAIT).toBe(2);
    const [across, along] = await labels(ui);
    expect(Math.abs((across?.length ?? 0) - 120 * COLUMN_MM)).toBeLessThan(1);
    expect(Math.abs((along?.length ?? 0) - 100 * ROW_MM)).toBeLessThan(1);
    expect(across?.text).toMatch(/^60\.\d mm|^59\.\d mm/);

    await ui.page.getByTestId('measure-ellipse').click();
    await drag(ui, [60, 70], [140, 130]);
    await ui.page.getByTestId('measure-rectangle').click();
    await drag(ui, [50, 60], [150, 140]);
    await ui.page.getByTestId('measure-probe').click();
    const air = await pageAt(ui, 10.5, 10.5);
    await ui.page.mouse.click(air.x, air.y);
    const inside = await pageAt(ui, 100.5, 100.5);
    await ui.page.mouse.click(inside.x, inside.y);
    await expect.poll(async () => (await labels(ui)).length, WAIT).toBe(6);
    // Esc puts the tool down and stays in the viewer.
    await ui.page.keyboard.press('Escape');
    await expect.poll(() => ui.page.getByTestId('measure-layer').getAttribute('data-tool'), WAIT).toBe('');
    await expect(ui.page.getByTestId('viewer').count()).resolves.toBe(1);

    const all = await labels(ui);
    const ellipse = all.find((l) => l.kind === 'ellipse');
    const rectangle = all.find((l) => l.kind === 'rectangle');
    const probes = all.filter((l) => l.kind === 'probe').map((l) => l.value);
    // Truth: pi/4 * 40 mm * 48 mm and 50 mm * 64 mm; the block is 40 HU with SD 10 (checkerboard).
    const ellipseArea = (Math.PI / 4) * 80 * COLUMN_MM * 60 * ROW_MM;
    expect(Math.abs((ellipse?.area ?? 0) - ellipseArea) / ellipseArea).toBeLessThan(0.03);
    expect(Math.abs((ellipse?.mean ?? 0) - 40)).toBeLessThan(1);
    expect(Math.abs((ellipse?.sd ?? 0) - 10)).toBeLessThan(0.5);
    expect(Math.abs((rectangle?.area ?? 0) - 100 * COLUMN_MM * 80 * ROW_MM) / 3200).toBeLessThan(0.03);
    expect(Math.abs((rectangle?.mean ?? 0) - 40)).toBeLessThan(1);
    expect(rectangle?.text).toContain('HU');
    expect(probes).toEqual([-1000, 50]);
    await ui.screenshot('measurements-phantom');

    // Kept on the server for this reader: a fresh page shows the same six with the same values.
    const again = await openPhantom();
    await expect.poll(async () => (await labels(again)).length, WAIT).toBe(6);
    expect((await labels(again)).map((l) => l.text)).toEqual(all.map((l) => l.text));
    await expect(again.page.getByTestId('measure-count').textContent()).resolves.toBe('6 kept');
    await again.page.getByTestId('measure-delete').first().click();
    await expect.poll(async () => (await labels(again)).length, WAIT).toBe(5);
    await again.screenshot('measurements-after-reload');

    // Listed in the reader's report, with the values shown in the viewer.
    await again.page.getByTestId('open-report').click();
    await again.page.getByTestId('draft-report').click();
    await expect.poll(() => again.page.getByTestId('report-measurement').count(), WAIT).toBe(5);
    const rows = await again.page.getByTestId('report-measurement').allTextContents();
    expect(rows.join('\n')).toContain('80.0 mm');
    expect(rows.join('\n')).toMatch(/area 1508\.0 mm² · mean 40\.0 ± 10\.0 HU/);
    await again.page.getByTestId('report-measurements').scrollIntoViewIfNeeded();
    await again.screenshot('measurements-report');
  }, 120_000);

  it('measures on a turned image: a length across the drawn block after a quarter turn is its 80 mm height', async () => {
    const ui = await openPhantom();
    await ui.page.keyboard.press('t');
    await ui.page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
    // Find the block's edges in the canvas pixels themselves, not through the code under test.
    const url = (await ui.page.evaluate(`document.querySelector('[data-testid="viewport-canvas"]').toDataURL()`)) as string;
    const png = readPng(Buffer.from(url.slice(url.indexOf(',') + 1), 'base64'));
    const ratio = (await ui.page.evaluate('window.devicePixelRatio')) as number;
    const y = Math.round(png.height / 2);
    const lit: number[] = [];
    for (let x = 0; x < png.width; x += 1) if ((png.pixels[(y * png.width + x) * png.channels] ?? 0) > 40) lit.push(x);
    const left = (lit[0] ?? 0) / ratio;
    const right = ((lit.at(-1) ?? 0) + 1) / ratio;
    const box = await ui.page.getByTestId('viewport-canvas').boundingBox();
    if (!box) throw new Error('no canvas');
    await ui.page.getByTestId('measure-length').click();
    await ui.page.mouse.move(box.x + left, box.y + y / ratio);
    await ui.page.mouse.down();
    await ui.page.mouse.move(box.x + right, box.y + y / ratio, { steps: 6 });
    await ui.page.mouse.up();
    const drawn = ui.page.getByTestId('measure-label').last();
    await expect.poll(async () => Number(await drawn.getAttribute('data-length-mm')), WAIT).toBeGreaterThan(0);
    expect(Math.abs(Number(await drawn.getAttribute('data-length-mm')) - 100 * ROW_MM)).toBeLessThan(1);
    await ui.screenshot('measurements-turned');
  }, 60_000);

  it('scrolls the stack with the wheel while a tool is on, and keeps each measurement on its own slice', async () => {
    const ui = await openUi(browser, t.url);
    await ui.signIn(reader);
    await ui.openScan(stackScan);
    const canvas = ui.page.getByTestId('viewport-canvas');
    // The viewer opens on the middle slice: start from wherever it is.
    await expect.poll(async () => (await canvas.getAttribute('data-rendered-slice')) || null, WAIT).not.toBeNull();
    const start = Number(await canvas.getAttribute('data-slice-index'));
    await ui.page.getByTestId('measure-length').click();
    await drag(ui, [10, 10], [50, 10]);
    await expect.poll(() => ui.page.getByTestId('measure-label').count(), WAIT).toBe(1);
    const box = await canvas.boundingBox();
    if (!box) throw new Error('no canvas');
    await ui.page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
    await ui.page.mouse.wheel(0, 120);
    await expect.poll(() => canvas.getAttribute('data-slice-index'), WAIT).toBe(String(start + 1));
    expect(await ui.page.getByTestId('measure-layer').getAttribute('data-tool')).toBe('length');
    await expect.poll(() => ui.page.getByTestId('measure-label').count(), WAIT).toBe(0);
    await ui.page.mouse.wheel(0, -120);
    await expect.poll(() => ui.page.getByTestId('measure-label').count(), WAIT).toBe(1);
  }, 60_000);
});
