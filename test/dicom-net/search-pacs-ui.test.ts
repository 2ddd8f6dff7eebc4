/**
 * The Search PACS screen in Debian's Chromium against a real Orthanc (issue 14, item 2): opened
 * from the worklist, a search by name with the keyboard lists the patient's studies; Retrieve and
 * Retrieve priors run to completion in the list of recent retrieves, and the studies are then on
 * the worklist. A PACS that is down is said so, with the reason.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { freePort, orthancInstalled, startOrthanc, type Orthanc } from '../helpers/orthanc.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { run } from './dimse-harness.ts';

type Fixture = { file: string; patient_id: string; study: string; study_date: string };

const WAIT = { timeout: 30_000 };
let work: string;
let t: TestServer;
let orthanc: Orthanc;
let browser: Browser;
let ui: Ui;
let fixtures: Fixture[] = [];
const studyOf = (date: string): string => fixtures.find((f) => f.study_date === date)?.study ?? '';

describe.skipIf(!orthancInstalled())('Search PACS screen', () => {
  beforeAll(async () => {
    ensureRendererBuilt();
    work = mkdtempSync(join(tmpdir(), 'mia-pacs-ui-'));
    const port = await freePort();
    t = await startTestServer({ uiDir: UI_DIR, dicom: { port, host: '127.0.0.1', aeTitle: 'MIA' } });
    orthanc = await startOrthanc({ modalities: { mia: { aeTitle: 'MIA', host: '127.0.0.1', port } } });
    const made = await run('/usr/bin/python3', [join(import.meta.dirname, 'qr_fixtures.py'), work, 'ui']);
    if (made.status !== 0) throw new Error(made.stderr);
    fixtures = JSON.parse(made.stdout) as Fixture[];
    for (const f of fixtures) await orthanc.rest('/instances', { method: 'POST', body: readFileSync(f.file) });
    await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dimse', name: 'pacs', ae_title: orthanc.aeTitle, host: '127.0.0.1', port: orthanc.dicomPort, allow_incoming: true } });
    await t.request('POST', '/v1/dicom/peers', { body: { kind: 'dimse', name: 'pacs-down', ae_title: 'DOWN', host: '127.0.0.1', port: await freePort() } });
    browser = await launchBrowser();
    ui = await openUi(browser, t.url, { width: 1600, height: 900 });
    // A reader an admin granted write:scans: searching is reading, retrieving stores studies.
    await ui.signIn((await t.keyFor('radiologist', { email: 'pacs-ui@hospital.test', scopes: ['write:scans'] })).key);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await orthanc?.stop();
    await t?.close();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  const page = () => ui.page;
  const studyRow = (date: string) => page().locator(`[data-testid="pacs-study-row"][data-study-uid="${studyOf(date)}"]`);

  it('opens from the worklist and searches by name with the keyboard', async () => {
    await ui.openWorklist();
    await page().getByTestId('open-search-pacs').click();
    await page().getByTestId('search-pacs').waitFor();
    // The name field has focus: type and press Enter.
    await page().keyboard.type('ALPHA*');
    await page().keyboard.press('Enter');
    await expect.poll(() => page().getByTestId('pacs-study-row').count(), WAIT).toBe(3);
    const row = studyRow('20240301');
    expect(await row.getByTestId('patient-name').textContent()).toBe('ALPHA, ANNA');
    expect(await row.getByTestId('pacs-study-date').textContent()).toBe('2024-03-01');
    expect(await row.textContent()).toContain('CT CHEST');
    await ui.screenshot('search-pacs-results');
  });

  it('retrieves a study and its priors, shows their progress, and the worklist then holds them', async () => {
    await studyRow('20240301').getByTestId('retrieve-study').click();
    const rows = page().getByTestId('retrieve-row');
    await expect.poll(() => rows.first().getAttribute('data-status'), WAIT).toBe('completed');
    expect(await rows.first().textContent()).toContain('5 of 5 images');

    await studyRow('20240301').getByTestId('retrieve-priors').click();
    await expect.poll(() => rows.count(), WAIT).toBe(2);
    await expect.poll(() => rows.first().getAttribute('data-status'), WAIT).toBe('completed');
    expect(await rows.first().getByTestId('retrieve-study').count()).toBe(2);
    expect(await rows.first().textContent()).toContain('Priors of QR-ui-A (before 2024-03-01)');
    await ui.screenshot('search-pacs-retrieved');

    await ui.openWorklist();
    const listed = page().getByTestId('study-row');
    await expect.poll(() => listed.evaluateAll((r) => r.map((e) => e.getAttribute('data-study-uid')).sort()), WAIT).toEqual(
      [studyOf('20240301'), studyOf('20220510'), studyOf('20200115')].sort(),
    );
  });

  it('says a PACS is down, naming the reason', async () => {
    await ui.goTo('#/pacs');
    await page().getByTestId('search-pacs').waitFor();
    await page().getByTestId('pacs-source').selectOption({ label: 'pacs-down (DICOM)' });
    await page().getByTestId('pacs-patient-id').fill('QR-ui-A');
    await page().getByTestId('pacs-search').click();
    const error = page().getByTestId('pacs-error');
    await error.waitFor(WAIT);
    expect(await error.textContent()).toMatch(/pacs-down is not reachable \(cannot connect to 127\.0\.0\.1:\d+ \(ECONNREFUSED\)\)/);
  });
});
