/**
 * Editing a kept measurement (issue 11, reading tools) in Debian's Chromium against the real
 * server, on the CT phantom of known size (measure_phantom.py: Pixel Spacing 0.8\0.5 mm, a
 * 60 x 80 mm block of 40 HU in air, columns 40-160, rows 50-150): an end of a length is dragged
 * to the block's edge and the length is then the block's width within 1 mm; the whole line is
 * dragged and keeps its length; an ROI's corner is dragged and its area and mean follow. What the
 * server keeps is checked through the API, and after a reload.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedAnalysis } from '../helpers/seed.ts';

const WAIT = { timeout: 10_000 };
const ROW_MM = 0.8;
const COLUMN_MM = 0.5;

let t: TestServer;
let browser: Browser;
let work: string;
let scanId = '';
let reader = '';

beforeAll(async () => {
  ensureRendererBuilt();
  work = mkdtempSync(join(tmpdir(), 'mia-measure-edit-'));
  const file = join(work, 'phantom.dcm');
  execFileSync('/usr/bin/python3', [join(import.meta.dirname, '..', 'helpers', 'measure_phantom.py'), file]);
  t = await startTestServer({ uiDir: UI_DIR });
  scanId = (await seedImportedInstance(t, file)).scanId;
  // An analysis to report on (a report is drafted from one); its finding is not what is tested.
  const row = (await t.server.services.db.get('SELECT s.id, st.study_uid, p.patient_id FROM scans s JOIN studies st ON st.id = s.study_ref JOIN patients p ON p.id = st.patient_ref WHERE s.scan_id = ?', [scanId])) as { id: number; study_uid: string; patient_id: string };
  await seedAnalysis(t.server.services.db, { scanId, scanRef: row.id, studyUid: row.study_uid, patientId: row.patient_id }, [{}]);
  reader = (await t.keyFor('radiologist')).key;
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

type Kept = { id: string; kind: string; points: Array<[number, number]>; length_mm: number | null; area_mm2: number | null; mean: number | null };

async function kept(): Promise<Kept[]> {
  const reply = await t.request('GET', `/v1/scans/${scanId}/measurements`, { key: reader });
  return reply.json.data.items as Kept[];
}

const labelOf = (ui: Ui, id: string) => ui.page.locator(`[data-testid="measure-label"][data-id="${id}"]`);

describe('editing measurements', () => {
  it('drags a length\'s end to the block edge (60 mm within 1 mm), moves the line whole, and drags an ROI corner', async () => {
    const ui = await openPhantom();
    await ui.page.getByTestId('measure-length').click();
    // 40 mm: from the block's left edge (column 40) to column 120.
    await drag(ui, [40, 100], [120, 100]);
    await expect.poll(async () => (await kept()).length, WAIT).toBe(1);
    const [line] = await kept();
    if (!line) throw new Error('no length kept');
    expect(Math.abs((line.length_mm ?? 0) - 80 * COLUMN_MM)).toBeLessThan(1);
    // The tool put down: handles work without one.
    await ui.page.keyboard.press('Escape');
    await expect.poll(() => ui.page.getByTestId('measure-layer').getAttribute('data-tool'), WAIT).toBe('');

    // Drag the right end to the block's right edge (column 160): 120 columns, 60 mm.
    await drag(ui, [120, 100], [160, 100]);
    await expect.poll(async () => (await kept())[0]?.length_mm ?? 0, WAIT).toBeGreaterThan(50);
    const stretched = (await kept())[0];
    expect(Math.abs((stretched?.length_mm ?? 0) - 120 * COLUMN_MM)).toBeLessThan(1);
    expect(stretched?.points[0]).toEqual(line.points[0]);
    // The label shows the server's value.
    await expect.poll(async () => Number(await labelOf(ui, line.id).getAttribute('data-length-mm')), WAIT).toBeCloseTo(stretched?.length_mm ?? 0, 6);
    expect(await labelOf(ui, line.id).textContent()).toMatch(/^(59|60)\.\d mm/);

    // Grab the line in its middle and move it 30 rows down (24 mm): its length stays.
    await drag(ui, [100, 100], [100, 130]);
    await expect.poll(async () => (await kept())[0]?.points[0]?.[1] ?? 0, WAIT).toBeGreaterThan(120);
    const moved = (await kept())[0];
    expect(Math.abs((moved?.points[0]?.[1] ?? 0) - 130)).toBeLessThan(1.5);
    expect(Math.abs((moved?.points[1]?.[1] ?? 0) - 130)).toBeLessThan(1.5);
    expect(Math.abs((moved?.length_mm ?? 0) - (stretched?.length_mm ?? 0))).toBeLessThan(0.1);

    // A rectangle inside the block, then its lower-right corner dragged out to the block's corner.
    await ui.page.getByTestId('measure-rectangle').click();
    await drag(ui, [50, 60], [100, 100]);
    await ui.page.keyboard.press('Escape');
    await expect.poll(async () => (await kept()).length, WAIT).toBe(2);
    const roi = (await kept())[1];
    if (!roi) throw new Error('no ROI kept');
    await drag(ui, [100, 100], [150, 140]);
    await expect.poll(async () => (await kept())[1]?.area_mm2 ?? 0, WAIT).toBeGreaterThan(2 * (roi.area_mm2 ?? 0));
    const grown = (await kept())[1];
    const truth = 100 * COLUMN_MM * 80 * ROW_MM;
    expect(Math.abs((grown?.area_mm2 ?? 0) - truth) / truth).toBeLessThan(0.03);
    expect(Math.abs((grown?.mean ?? 0) - 40)).toBeLessThan(1);
    await ui.page.mouse.move(5, 5);
    await ui.screenshot('measurement-edit');

    // Kept: a fresh page shows them where they were left.
    const again = await openPhantom();
    await expect.poll(async () => Number(await labelOf(again, line.id).getAttribute('data-length-mm')), WAIT).toBeCloseTo(moved?.length_mm ?? 0, 6);
    await expect.poll(async () => Number(await labelOf(again, roi.id).getAttribute('data-area-mm2')), WAIT).toBeCloseTo(grown?.area_mm2 ?? 0, 6);

    // Signed into a final report: a drag is refused (409, shown) and the line goes back where it was.
    const report = (await t.request('POST', '/v1/reports', { key: reader, body: { scan_id: scanId } })).json.data;
    expect((await t.request('PATCH', `/v1/reports/${report.id}`, { key: reader, body: { status: 'final' } })).status).toBe(200);
    t.clock.advance(60_000);
    const end = moved?.points[1] ?? [0, 0];
    await drag(again, [end[0], end[1]], [end[0] - 40, end[1]]);
    await expect.poll(() => again.page.getByTestId('measure-error').textContent(), WAIT).toContain(report.id);
    await expect.poll(async () => Number(await labelOf(again, line.id).getAttribute('data-length-mm')), WAIT).toBeCloseTo(moved?.length_mm ?? 0, 6);
    expect((await kept())[0]?.points).toEqual(moved?.points);
    await again.screenshot('measurement-edit-signed');
  }, 120_000);
});
