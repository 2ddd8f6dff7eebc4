/**
 * Workstation UI in headless Chromium (Debian's, --disable-gpu) against the real server serving
 * the built renderer: cold start to an interactive worklist of 500 scans, and scrolling a
 * 200-slice series (frames per second, first pass while frames stream in, then cached).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR } from '../test/helpers/browser.ts';
import { seedAnalysis, seedScan } from '../test/helpers/seed.ts';
import { startTestServer, type TestServer } from '../test/helpers/server.ts';
import { setAside } from './set-aside.ts';

const PHANTOMS = join(import.meta.dirname, '..', 'models', 'mia-phantom-detector', 'phantoms.py');

async function importSeries(t: TestServer, slices: number): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'mia-bench-ui-'));
  try {
    execFileSync('/usr/bin/python3', [PHANTOMS, '--out', dir, '--series', '1', '--seed', '777', '--modality', 'CT', '--size', '256', '--slices', String(slices)], { stdio: 'ignore' });
    const started = await t.request('POST', '/v1/imports', { body: { path: dir } });
    const id = started.json.data.id as string;
    for (;;) {
      const job = await t.request('GET', `/v1/imports/${id}`);
      if (!['queued', 'running'].includes(job.json.data.status)) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const scans = await t.request('GET', '/v1/scans?modality=CT&limit=500');
    const scan = (scans.json.data.items as any[]).find((s) => s.instance_count === slices);
    if (!scan) throw new Error('the 200-slice series was not imported');
    return scan.scan_id as string;
  } finally {
    setAside(dir);
  }
}

/** Steps through every slice with wheel events; each step waits until that slice is drawn. */
const SCROLL_SCRIPT = `(async () => {
  const canvas = document.querySelector('[data-testid="viewport-canvas"]');
  const total = Number(document.querySelector('[data-testid="slice-slider"]').max) + 1;
  const drawn = (i) => new Promise((resolve) => {
    const check = () => (canvas.dataset.renderedSlice === String(i) ? resolve() : requestAnimationFrame(check));
    check();
  });
  const start = performance.now();
  for (let i = 1; i < total; i += 1) {
    canvas.dispatchEvent(new WheelEvent('wheel', { deltaY: 100, bubbles: true, cancelable: true }));
    await drawn(i);
  }
  return { frames: total - 1, ms: performance.now() - start };
})()`;

export async function run(): Promise<string> {
  ensureRendererBuilt();
  const t = await startTestServer({ uiDir: UI_DIR, rateLimit: { requests: 1_000_000, windowMs: 60_000, authFailures: 60 } });
  const browser = await launchBrowser();
  try {
    const db = t.server.services.db;
    for (let i = 0; i < 500; i += 1) {
      const scan = await seedScan(db, { modality: i % 3 === 0 ? 'CT' : 'MR', description: `bench ${i}` });
      if (i % 2 === 0) await seedAnalysis(db, scan, [{ confidence: 0.5 + (i % 50) / 100 }]);
    }
    const scanId = await importSeries(t, 200);
    const key = (await t.keyFor('radiologist')).key;

    // Cold start: a fresh browser context (empty cache), page load, key check, 500 rows shown.
    const coldRuns: number[] = [];
    for (let run = 0; run < 3; run += 1) {
      const started = performance.now();
      const ui = await openUi(browser, t.url);
      await ui.signIn(key);
      await ui.page.getByTestId('worklist-count').filter({ hasText: '501 of 501 scans' }).waitFor();
      coldRuns.push(performance.now() - started);
      await ui.page.context().close();
    }

    const ui = await openUi(browser, t.url);
    await ui.signIn(key);
    await ui.openScan(scanId);
    // Locators, not waitForFunction: the page's CSP forbids string evaluation.
    await ui.page.locator('[data-testid="viewport-canvas"][data-rendered-slice]:not([data-rendered-slice=""])').waitFor();
    // Start from the first slice (the viewer opens in the middle of the series).
    await ui.page.keyboard.press('Home');
    await ui.page.locator('[data-testid="viewport-canvas"][data-rendered-slice="0"]').waitFor();
    const first = (await ui.page.evaluate(SCROLL_SCRIPT)) as { frames: number; ms: number };
    await ui.page.keyboard.press('Home');
    await ui.page.locator('[data-testid="viewport-canvas"][data-rendered-slice="0"]').waitFor();
    const cached = (await ui.page.evaluate(SCROLL_SCRIPT)) as { frames: number; ms: number };
    // The second pass ended on the last slice: back to the first, then ten pages down to slice 100.
    await ui.page.keyboard.press('Home');
    for (let i = 0; i < 10; i += 1) await ui.page.keyboard.press('PageDown');
    await ui.page.locator('[data-testid="viewport-canvas"][data-rendered-slice="100"]').waitFor();
    await ui.screenshot('bench-viewer-ct');

    const median = [...coldRuns].sort((a, b) => a - b)[1] ?? 0;
    const fps = (r: { frames: number; ms: number }) => ((r.frames / r.ms) * 1000).toFixed(0);
    return [
      '## Workstation UI',
      '',
      `Headless Chromium (Debian, \`--disable-gpu\`) via playwright-core against \`mia serve\` with the built renderer on loopback; ${cpus().length} cores. \`npm run bench -- ui\`.`,
      '',
      '| measure | result |',
      '|---|---|',
      `| cold start to an interactive worklist of 501 scans (new browser context, page load, key check, all rows rendered), median of 3 | ${median.toFixed(0)} ms (runs: ${coldRuns.map((ms) => ms.toFixed(0)).join(', ')}) |`,
      `| scrolling a 200-slice CT series (256×256, 16-bit), first pass while frames are fetched and prefetched | ${fps(first)} frames/s (${first.frames} slices in ${first.ms.toFixed(0)} ms) |`,
      `| the same series, second pass (frames cached; window/level and draw per slice) | ${fps(cached)} frames/s (${cached.frames} slices in ${cached.ms.toFixed(0)} ms) |`,
      '',
      'Each scroll step is one wheel event and counts only when that slice has been drawn on the canvas.',
      '',
    ].join('\n');
  } finally {
    await browser.close();
    await t.close();
  }
}
