/**
 * Study-level reading in the viewer (issue 11) in Debian's Chromium against the real server: one
 * patient with a current study (an axial CT, a second axial CT with other slice positions, a
 * sagittal CT) and a prior study (axial CT, older date, its own frame of reference). 1x2 puts
 * the prior beside the scan with PRIOR and its date; 2x2 adds the study's next series and the
 * sagittal one. Scrolling pane 1 moves the same-study axial pane to the slice nearest by position,
 * not the sagittal pane (the reason is shown); a linked prior keeps the offset it had when linked;
 * scrolling a comparison pane moves pane 1; thumbnails fill panes by click and by drag.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Locator } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { seedImportedInstance } from '../helpers/image-fixture.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { makePhantoms } from '../imports/helpers.ts';

const WAIT = { timeout: 15_000 };
const SEED = 20260301;
const STUDY_SET = join(import.meta.dirname, '..', 'helpers', 'study_set.py');

type Made = Record<'current' | 'thin' | 'sagittal' | 'prior', { series_uid: string; positions: number[] }>;

let t: TestServer;
let browser: Browser;
let work: string;
let made: Made;

beforeAll(async () => {
  ensureRendererBuilt();
  work = mkdtempSync(join(tmpdir(), 'mia-layouts-'));
  makePhantoms(join(work, 'phantoms'), { series: 1, seed: SEED, size: 64, slices: 10, modality: 'CT' });
  const spec = {
    patient_id: 'LAYOUT-1',
    series: [
      // Pane 1: ten axial slices 5 mm apart from 0 mm.
      { name: 'current', study: 'now', date: '20250301', number: 1, plane: 'axial', first_mm: 0, step_mm: 5, description: 'Axial 5 mm' },
      // The study's next series: other positions (3.5 mm apart from 1 mm), same frame of reference.
      { name: 'thin', study: 'now', date: '20250301', number: 2, plane: 'axial', first_mm: 1, step_mm: 3.5, description: 'Axial 3.5 mm' },
      { name: 'sagittal', study: 'now', date: '20250301', number: 3, plane: 'sagittal', first_mm: -20, step_mm: 4, description: 'Sagittal' },
      // The prior: placed 37 mm further towards the head in its own coordinates.
      { name: 'prior', study: 'before', date: '20230115', number: 1, plane: 'axial', first_mm: 37, step_mm: 5, description: 'Axial 5 mm (prior)' },
    ],
  };
  const out = join(work, 'set');
  made = JSON.parse(execFileSync('/usr/bin/python3', [STUDY_SET, join(work, 'phantoms', `series-${SEED}-CT`), out, JSON.stringify(spec)], { encoding: 'utf8' })) as Made;
  t = await startTestServer({ uiDir: UI_DIR });
  for (const name of Object.keys(made)) {
    for (const file of readdirSync(join(out, name))) await seedImportedInstance(t, join(out, name, file));
  }
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

const pane = (ui: Ui, n: number): Locator => ui.page.locator(`[data-testid="viewer-pane"][data-pane="${n}"]`);
const paneSlice = async (ui: Ui, n: number): Promise<number> => Number(await pane(ui, n).getByTestId('pane-canvas').getAttribute('data-slice-index'));
const primarySlice = async (ui: Ui): Promise<number> => Number(await ui.page.getByTestId('viewport-canvas').getAttribute('data-slice-index'));

/** The nearest slice to `mm` (ties to the lower index), as a reader would pick it by the positions the test wrote. */
function nearest(positions: number[], mm: number): number {
  let best = 0;
  positions.forEach((p, i) => {
    if (Math.abs(p - mm) < Math.abs((positions[best] ?? Infinity) - mm)) best = i;
  });
  return best;
}

async function openCurrent(): Promise<Ui> {
  const ui = await openUi(browser, t.url, { width: 1600, height: 1000 });
  await ui.signIn(t.adminKey);
  await ui.openScan(made.current.series_uid);
  await expect.poll(() => ui.page.getByTestId('viewport-canvas').getAttribute('data-rendered-slice'), WAIT).toBe('5');
  return ui;
}

async function wheel(ui: Ui, target: Locator, steps: number): Promise<void> {
  const box = (await target.boundingBox())!;
  await ui.page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  for (let i = 0; i < Math.abs(steps); i++) await ui.page.mouse.wheel(0, steps > 0 ? 100 : -100);
}

describe('viewer layouts and synchronized scrolling', () => {
  it('1x2 shows the most recent prior of the same modality beside the scan, marked PRIOR with its date', async () => {
    const ui = await openCurrent();
    expect(await ui.page.locator('[data-testid="viewer-pane"]').count()).toBe(1);
    await ui.page.getByTestId('layout-1x2').click();
    await expect.poll(() => pane(ui, 2).getAttribute('data-scan-id'), WAIT).toBe(made.prior.series_uid);
    await expect.poll(() => pane(ui, 2).getByTestId('pane-canvas').getAttribute('data-rendered-slice'), WAIT).not.toBe('');
    expect(await pane(ui, 2).getByTestId('prior-label').textContent()).toBe('PRIOR');
    expect(await pane(ui, 2).getByTestId('pane-study-date').textContent()).toBe('2023-01-15');
    // Pane 1 is not a prior, and the prior is not linked until the reader aligns and links it.
    expect(await pane(ui, 1).getByTestId('prior-label').count()).toBe(0);
    expect(await pane(ui, 2).getByTestId('pane-sync').getAttribute('data-link-mode')).toBe('off');
    expect(await pane(ui, 2).getByTestId('pane-sync').textContent()).toMatch(/another study has its own coordinates/);
    // Both panes draw an image side by side, each with its own markers and scale bar.
    const one = (await pane(ui, 1).boundingBox())!;
    const two = (await pane(ui, 2).boundingBox())!;
    expect(two.x).toBeGreaterThan(one.x + one.width - 1);
    expect(await pane(ui, 2).getByTestId('orient-left').textContent()).toBe('R');
    await expect.poll(() => pane(ui, 2).getByTestId('scale-bar').count(), WAIT).toBe(1);
    // The strip groups the series by study, this study first, and says which pane shows what.
    const studies = ui.page.getByTestId('series-study');
    expect(await studies.count()).toBe(2);
    expect(await studies.nth(0).textContent()).toMatch(/This study · 2025-03-01/);
    expect(await studies.nth(1).textContent()).toMatch(/Prior · 2023-01-15/);
    expect(await ui.page.locator(`[data-testid="series-item"][data-scan-id="${made.prior.series_uid}"]`).getAttribute('data-pane')).toBe('2');
    await ui.screenshot('viewer-layout-1x2');
    // The key l cycles layouts: 2x2, then back to 1x1.
    await ui.page.keyboard.press('l');
    await expect.poll(() => ui.page.locator('[data-testid="viewer-pane"]').count(), WAIT).toBe(4);
    await ui.page.keyboard.press('l');
    await expect.poll(() => ui.page.locator('[data-testid="viewer-pane"]').count(), WAIT).toBe(1);
    await ui.page.context().close();
  });

  it('2x2: scrolling pane 1 moves the same-study pane to the nearest slice by position, not the sagittal one', async () => {
    const ui = await openCurrent();
    await ui.page.getByTestId('layout-2x2').click();
    await expect.poll(() => pane(ui, 3).getAttribute('data-scan-id'), WAIT).toBe(made.thin.series_uid);
    await expect.poll(() => pane(ui, 4).getAttribute('data-scan-id'), WAIT).toBe(made.sagittal.series_uid);
    await expect.poll(() => pane(ui, 3).getByTestId('pane-sync').getAttribute('data-link-mode'), WAIT).toBe('absolute');
    // Linked at once: pane 1 is on slice 6 (25 mm); the thin series' nearest is 25.5 mm (slice 8).
    await expect.poll(() => paneSlice(ui, 3), WAIT).toBe(nearest(made.thin.positions, made.current.positions[5]!));
    expect(nearest(made.thin.positions, 25)).toBe(7);
    // The sagittal pane is not synced, and says why.
    await expect.poll(() => pane(ui, 4).getByTestId('pane-sync').getAttribute('data-link-mode'), WAIT).toBe('none');
    expect(await pane(ui, 4).getByTestId('pane-sync').textContent()).toMatch(/not parallel \(90° apart\)/);
    expect(await pane(ui, 4).getByTestId('orient-top').textContent()).toBe('H');
    const sagittalBefore = await paneSlice(ui, 4);

    for (const steps of [-3, -2, 4, 3]) {
      await wheel(ui, ui.page.getByTestId('viewport-canvas'), steps);
      const at = await primarySlice(ui);
      const mm = made.current.positions[at]!;
      await expect.poll(() => paneSlice(ui, 3), WAIT).toBe(nearest(made.thin.positions, mm));
      // The pane's own overlay names the position it landed on.
      const text = (await pane(ui, 3).getByTestId('pane-slice').textContent()) ?? '';
      expect(text).toContain(`Pos ${made.thin.positions[nearest(made.thin.positions, mm)]!.toFixed(1)} mm`);
    }
    expect(await primarySlice(ui)).toBe(7);
    expect(await paneSlice(ui, 4)).toBe(sagittalBefore);
    await ui.screenshot('viewer-layout-2x2');

    // Scrolling the same-study pane moves pane 1 to its nearest slice.
    await wheel(ui, pane(ui, 3).getByTestId('pane-canvas'), -4);
    const thinAt = await paneSlice(ui, 3);
    await expect.poll(() => primarySlice(ui), WAIT).toBe(nearest(made.current.positions, made.thin.positions[thinAt]!));

    // Sync off: pane 1 scrolls alone.
    await ui.page.keyboard.press('s');
    expect(await ui.page.getByTestId('sync-toggle').textContent()).toBe('Sync off');
    const still = await paneSlice(ui, 3);
    await wheel(ui, ui.page.getByTestId('viewport-canvas'), 3);
    await expect.poll(() => primarySlice(ui), WAIT).not.toBe(nearest(made.current.positions, made.thin.positions[still]!));
    expect(await paneSlice(ui, 3)).toBe(still);
    await ui.page.context().close();
  });

  it('a linked prior keeps the offset that held when it was linked, both ways', async () => {
    const ui = await openCurrent();
    await ui.page.getByTestId('layout-1x2').click();
    await expect.poll(() => pane(ui, 2).getByTestId('pane-canvas').getAttribute('data-rendered-slice'), WAIT).not.toBe('');
    // Align by eye: the prior's slice 4 (52 mm) with pane 1's slice 6 (25 mm): offset +27 mm.
    await wheel(ui, pane(ui, 2).getByTestId('pane-canvas'), -2);
    await expect.poll(() => paneSlice(ui, 2), WAIT).toBe(3);
    expect(await primarySlice(ui)).toBe(5);
    await pane(ui, 2).getByTestId('pane-link').check();
    await expect.poll(() => pane(ui, 2).getByTestId('pane-sync').getAttribute('data-link-mode'), WAIT).toBe('offset');
    expect(await pane(ui, 2).getByTestId('pane-sync').textContent()).toContain('+27.0 mm');
    await ui.screenshot('viewer-layout-prior-linked');
    await wheel(ui, ui.page.getByTestId('viewport-canvas'), 2);
    await expect.poll(() => primarySlice(ui), WAIT).toBe(7);
    await expect.poll(() => paneSlice(ui, 2), WAIT).toBe(nearest(made.prior.positions, made.current.positions[7]! + 27));
    expect(await paneSlice(ui, 2)).toBe(5);
    // And from the prior back to pane 1.
    await wheel(ui, pane(ui, 2).getByTestId('pane-canvas'), -4);
    await expect.poll(() => paneSlice(ui, 2), WAIT).toBe(1);
    await expect.poll(() => primarySlice(ui), WAIT).toBe(nearest(made.current.positions, made.prior.positions[1]! - 27));
    // Slice keys move the active pane: pane 2, the one scrolled last.
    await ui.page.keyboard.press('ArrowDown');
    await expect.poll(() => paneSlice(ui, 2), WAIT).toBe(2);
    await expect.poll(() => primarySlice(ui), WAIT).toBe(nearest(made.current.positions, made.prior.positions[2]! - 27));
    await ui.page.context().close();
  });

  it('counts every wheel step of a pane, even when they come faster than the screen redraws or arrive coalesced', async () => {
    const ui = await openCurrent();
    await ui.page.getByTestId('layout-1x2').click();
    await expect.poll(() => pane(ui, 2).getByTestId('pane-canvas').getAttribute('data-rendered-slice'), WAIT).not.toBe('');
    // Steps dispatched in one task: React has no chance to re-render between them.
    const steps = (n: number, deltaY: number) =>
      pane(ui, 2)
        .getByTestId('pane-canvas')
        .evaluate(
          (canvas, { n, deltaY }) => {
            const Wheel = (globalThis as unknown as { WheelEvent: new (type: string, init: object) => Event }).WheelEvent;
            for (let i = 0; i < n; i++) canvas.dispatchEvent(new Wheel('wheel', { deltaY, bubbles: true, cancelable: true }));
          },
          { n, deltaY },
        );
    // To the first slice (whatever the pane settled on), then three down from there.
    await steps(30, -100);
    await expect.poll(() => paneSlice(ui, 2), WAIT).toBe(0);
    await steps(3, 100);
    await expect.poll(() => paneSlice(ui, 2), WAIT).toBe(3);
    // Two notches in one event, as Chromium coalesces wheel events while the page is busy: two slices.
    await steps(1, 200);
    await expect.poll(() => paneSlice(ui, 2), WAIT).toBe(5);
    await ui.page.context().close();
  });

  it('puts a series in a pane by clicking its thumbnail with the pane selected, or by dragging it there', async () => {
    const ui = await openCurrent();
    await ui.page.getByTestId('layout-1x2').click();
    await expect.poll(() => pane(ui, 2).getAttribute('data-scan-id'), WAIT).toBe(made.prior.series_uid);
    await pane(ui, 2).click();
    await expect.poll(() => pane(ui, 2).getAttribute('class'), WAIT).toContain('active');
    await ui.page.locator(`[data-testid="series-item"][data-scan-id="${made.thin.series_uid}"]`).click();
    await expect.poll(() => pane(ui, 2).getAttribute('data-scan-id'), WAIT).toBe(made.thin.series_uid);
    expect(await pane(ui, 2).getByTestId('prior-label').count()).toBe(0);
    await expect.poll(() => pane(ui, 2).getByTestId('pane-sync').getAttribute('data-link-mode'), WAIT).toBe('absolute');
    // Drag the sagittal series onto pane 2.
    await ui.page.locator(`[data-testid="series-item"][data-scan-id="${made.sagittal.series_uid}"]`).dragTo(pane(ui, 2));
    await expect.poll(() => pane(ui, 2).getAttribute('data-scan-id'), WAIT).toBe(made.sagittal.series_uid);
    await expect.poll(() => pane(ui, 2).getByTestId('pane-sync').getAttribute('data-link-mode'), WAIT).toBe('none');
    // Pane 1 stays the scan the viewer reads.
    expect(await ui.page.getByTestId('viewer').getAttribute('data-scan-id')).toBe(made.current.series_uid);
    await ui.page.context().close();
  });
});
