/**
 * Debian's Chromium driven by playwright-core against a real server serving the built renderer.
 * Screen helpers (openWorklist, openScan...) keep the UI tests readable.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';

export const CHROMIUM = process.env['MIA_CHROMIUM'] ?? '/usr/bin/chromium';
export const ROOT = join(import.meta.dirname, '..', '..');
export const UI_DIR = join(ROOT, 'renderer', 'dist');
export const SCREENSHOTS = join(ROOT, 'test-results', 'screenshots');

/** Builds the renderer when missing or stale (the same check the gate script uses). */
export function ensureRendererBuilt(): void {
  execFileSync('bash', [join(ROOT, 'scripts', 'build-renderer.sh')], { cwd: ROOT, stdio: 'inherit' });
}

export async function launchBrowser(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: apt-get install chromium (scripts/system-deps.sh)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

export type Ui = {
  page: Page;
  signIn(key: string): Promise<void>;
  openWorklist(): Promise<void>;
  openScan(scanId: string): Promise<void>;
  openReport(scanId: string): Promise<void>;
  openAdmin(): Promise<void>;
  /** Changes the hash without waiting for any screen. */
  goTo(hash: string): Promise<void>;
  screenshot(name: string): Promise<Buffer>;
};

/** What Electron's preload would hand over: the test decides which key each call returns. */
export type FakeDesktop = { getSession(): Promise<{ baseUrl: string; apiKey: string }> };

export async function openUi(browser: Browser, url: string, options: { width?: number; height?: number; desktop?: FakeDesktop } = {}): Promise<Ui> {
  const context = await browser.newContext({ viewport: { width: options.width ?? 1400, height: options.height ?? 900 }, acceptDownloads: true });
  const page = await context.newPage();
  page.on('pageerror', (error) => process.stderr.write(`[page error] ${error.message}\n`));
  if (options.desktop) {
    // Stands in for main/preload.ts: window.mia with the same shape, answered by the test.
    await page.exposeFunction('__miaTestSession', () => options.desktop!.getSession());
    await page.addInitScript(
      `window.mia = { kind: 'electron', getSession: () => window.__miaTestSession(), pickFolder: () => Promise.resolve(null) };`,
    );
  }
  await page.goto(url + '/');
  const go = async (hash: string) => {
    // A string expression: the test project has no DOM types, and the page keeps its in-memory key.
    await page.evaluate(`window.location.hash = ${JSON.stringify(hash)}`);
  };
  return {
    page,
    async signIn(key) {
      await page.getByTestId('key-input').fill(key);
      await page.getByTestId('key-submit').click();
      await page.getByTestId('nav-worklist').waitFor();
    },
    goTo: go,
    async openWorklist() {
      await go('#/worklist');
      await page.getByTestId('worklist').waitFor();
    },
    async openScan(scanId) {
      await go(`#/scan/${encodeURIComponent(scanId)}`);
      await page.getByTestId('viewer').waitFor();
    },
    async openReport(scanId) {
      await go(`#/report/${encodeURIComponent(scanId)}`);
      await page.getByTestId('report').waitFor();
    },
    async openAdmin() {
      await go('#/admin');
      await page.getByTestId('admin').waitFor();
    },
    async screenshot(name) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      return page.screenshot({ path: join(SCREENSHOTS, `${name}.png`) });
    },
  };
}
