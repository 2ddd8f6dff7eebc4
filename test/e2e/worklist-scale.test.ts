/**
 * The worklist with more studies than one page of the API and far more rows than it draws
 * (issue 15: it reads the studies page by page and keeps only the rows in view in the DOM), in
 * Debian's Chromium against the real server. Rows come from bench/generate-scale.ts; what each
 * view should show is worked out from the API's studies by the renderer's own DOM-free ordering
 * (worklist-rows.ts), so the test checks the drawing, not the sort it already has tests for.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Study } from '../../renderer/src/api/types.ts';
import { DEFAULT_SORT, worklistRows, type Filters, type Sort } from '../../renderer/src/worklist-rows.ts';
import { generateScale } from '../../bench/generate-scale.ts';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';

/** About 1,200 studies: three pages of the API's 500. */
const SCANS = 3_000;
const WAIT = { timeout: 20_000 };
const NO_FILTER: Filters = { search: '', modality: '', status: '', aiOnly: false };

let t: TestServer;
let browser: Browser;
let ui: Ui;
let studies: Study[];

/** Study UIDs and scan IDs in the order the worklist should list them. */
function expectedLines(filters: Filters, sort: Sort): string[] {
  return worklistRows(studies, filters, sort).flatMap(({ study, series }) => [study.study_uid, ...series.map((s) => s.scan_id)]);
}

/** The lines in the DOM, in order, by the same ids. */
async function drawnLines(): Promise<string[]> {
  return ui.page
    .locator('[data-testid="study-row"], [data-testid="scan-row"]')
    .evaluateAll((rows) => rows.map((r) => r.getAttribute('data-study-uid') ?? r.getAttribute('data-scan-id') ?? ''));
}

/** Scrolls the worklist's box to `fraction` of its height and waits for the rows there. */
async function scrollTo(fraction: number): Promise<void> {
  const box = ui.page.getByTestId('worklist-scroll');
  await box.evaluate((element, f) => {
    element.scrollTop = f * (element.scrollHeight - element.clientHeight);
  }, fraction);
  // Two frames: the scroll event, then React's render of the new window.
  await ui.page.evaluate('new Promise((resolve) => requestAnimationFrame(() => requestAnimationFrame(resolve)))');
}

beforeAll(async () => {
  ensureRendererBuilt();
  t = await startTestServer({ uiDir: UI_DIR });
  await generateScale(t.dataDir, { scans: SCANS, findings: SCANS * 2, seed: 7 });
  studies = [];
  let cursor: string | null = null;
  do {
    const page = (await t.request('GET', `/v1/studies?limit=500${cursor ? `&cursor=${cursor}` : ''}`)).json.data as { items: Study[]; next_cursor: string | null };
    studies.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  browser = await launchBrowser();
  ui = await openUi(browser, t.url);
  await ui.signIn((await t.keyFor('radiologist')).key);
  await ui.page.getByTestId('worklist-count').filter({ hasText: `${SCANS} of ${SCANS} scans` }).waitFor(WAIT);
  await ui.page.getByTestId('worklist-loading').waitFor({ state: 'detached', ...WAIT });
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('worklist at scale', () => {
  it('reads every page of studies and draws only the rows in view, in list order', async () => {
    expect(studies.length).toBeGreaterThan(1000);
    const expected = expectedLines(NO_FILTER, DEFAULT_SORT);
    expect(expected.length).toBe(studies.length + SCANS);
    const drawn = await drawnLines();
    expect(drawn.length).toBeGreaterThan(10);
    expect(drawn.length).toBeLessThan(120);
    expect(drawn).toEqual(expected.slice(0, drawn.length));
  });

  it('scrolled to the middle and to the end, shows the rows that belong there', async () => {
    const expected = expectedLines(NO_FILTER, DEFAULT_SORT);
    await scrollTo(0.5);
    const middle = await drawnLines();
    const at = expected.indexOf(middle[0]!);
    expect(at).toBeGreaterThan(expected.length / 4);
    expect(middle).toEqual(expected.slice(at, at + middle.length));
    await scrollTo(1);
    const end = await drawnLines();
    expect(end.length).toBeLessThan(120);
    expect(end).toEqual(expected.slice(expected.length - end.length));
    // The last row is on screen, not only in the DOM.
    await expect(ui.page.locator(`[data-scan-id="${expected.at(-1)}"], [data-study-uid="${expected.at(-1)}"]`).isVisible()).resolves.toBe(true);
    await scrollTo(0);
  });

  it('keyboard selection moves the list with it', async () => {
    await ui.page.locator('body').click({ position: { x: 5, y: 5 } });
    for (let i = 0; i < 60; i += 1) await ui.page.keyboard.press('j');
    const series = worklistRows(studies, NO_FILTER, DEFAULT_SORT).flatMap((row) => row.series);
    const selected = ui.page.locator('[data-testid="scan-row"].selected');
    await expect(selected.getAttribute('data-scan-id')).resolves.toBe(series[60]!.scan_id);
    await expect(selected.isVisible()).resolves.toBe(true);
    for (let i = 0; i < 60; i += 1) await ui.page.keyboard.press('k');
    await expect(selected.getAttribute('data-scan-id')).resolves.toBe(series[0]!.scan_id);
  });

  it('filters, searches and sorts over every study read', async () => {
    const count = ui.page.getByTestId('worklist-count');
    const scansOf = (filters: Filters) => worklistRows(studies, filters, DEFAULT_SORT).reduce((n, row) => n + row.series.length, 0);

    await ui.page.getByTestId('filter-modality').selectOption('PT');
    const pt = scansOf({ ...NO_FILTER, modality: 'PT' });
    await count.filter({ hasText: `${pt} of ${SCANS} scans` }).waitFor(WAIT);
    expect(await drawnLines()).toEqual(expectedLines({ ...NO_FILTER, modality: 'PT' }, DEFAULT_SORT).slice(0, (await drawnLines()).length));
    await ui.page.getByTestId('filter-modality').selectOption('');

    await ui.page.getByTestId('filter-patient').fill('muller');
    const muller = scansOf({ ...NO_FILTER, search: 'muller' });
    expect(muller).toBeGreaterThan(0);
    expect(muller).toBeLessThan(SCANS);
    await count.filter({ hasText: `${muller} of ${SCANS} scans` }).waitFor(WAIT);
    await ui.page.getByTestId('filter-patient').fill('');
    await count.filter({ hasText: `${SCANS} of ${SCANS} scans` }).waitFor(WAIT);

    await ui.page.getByTestId('sort-date').click();
    const byDate: Sort = { key: 'date', descending: true };
    await ui.page.getByTestId('sort-date').and(ui.page.locator('[aria-sort="descending"]')).waitFor(WAIT);
    const drawn = await drawnLines();
    expect(drawn).toEqual(expectedLines(NO_FILTER, byDate).slice(0, drawn.length));
    await scrollTo(1);
    const end = await drawnLines();
    expect(end).toEqual(expectedLines(NO_FILTER, byDate).slice(-end.length));
  });
});
