/**
 * The Admin screen's DICOM panel in Debian's Chromium against the real server: an admin adds a
 * DICOMweb server and a DICOM node (allowed to call mia, then not), adds a rule "a CT analysis
 * finishes -> send its SR", a real analysis of a phantom CT makes a job, which fails against the
 * server while it is down (the panel shows the error and attempts), and Retry now sends it once
 * it is up (a STOW-RS server at the network edge; Orthanc is the real peer in test/dicom-net/).
 */
import { createServer, type Server } from 'node:http';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { freePort } from '../helpers/orthanc.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { analyseViaApi, importPhantoms, type PhantomWorkstation } from '../helpers/workstation-seed.ts';

let t: TestServer;
let browser: Browser;
let phantoms: PhantomWorkstation;
let ui: Ui;

const WAIT = { timeout: 15_000 };

beforeAll(async () => {
  ensureRendererBuilt();
  t = await startTestServer({ uiDir: UI_DIR, routingPollMs: 200 });
  phantoms = await importPhantoms(t);
  browser = await launchBrowser();
  ui = await openUi(browser, t.url);
  await ui.signIn(t.adminKey);
}, 180_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

/** Answers every STOW-RS request as stored (PS3.18 Store Instances Response). */
async function stowServer(port: number): Promise<{ server: Server; received: number }> {
  const state = { server: createServer(), received: 0 };
  state.server.on('request', (req, res) => {
    req.resume();
    req.on('end', () => {
      state.received += 1;
      res.writeHead(200, { 'Content-Type': 'application/dicom+json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => state.server.listen(port, '127.0.0.1', resolve));
  return state;
}

describe('DICOM admin panel', () => {
  it('adds peers and a rule, shows a failed send with its error, and sends it again with Retry now', async () => {
    const port = await freePort();
    const { page } = ui;
    await ui.openAdmin();
    const peers = page.getByTestId('dicom-peers');
    await peers.waitFor();

    await page.getByTestId('peer-kind').selectOption('dicomweb');
    await page.getByTestId('peer-name').fill('Cloud PACS');
    await page.getByTestId('peer-url').fill(`http://127.0.0.1:${port}/dicom-web`);
    await page.getByTestId('add-peer').click();
    await peers.getByRole('cell', { name: 'Cloud PACS' }).waitFor();

    await page.getByTestId('peer-kind').selectOption('dimse');
    await page.getByTestId('peer-name').fill('CT scanner');
    await page.getByTestId('peer-ae-title').fill('CT01');
    await page.getByTestId('peer-host').fill('127.0.0.1');
    await page.getByTestId('peer-port').fill('11112');
    await page.getByLabel('may call mia').check();
    await page.getByTestId('add-peer').click();
    const scanner = peers.locator('tr', { hasText: 'CT scanner' });
    await expect.poll(async () => await scanner.getByTestId('peer-incoming').isChecked(), WAIT).toBe(true);
    // The box follows the server: it turns off once the change is stored and the panel reloads.
    await scanner.getByTestId('peer-incoming').click();
    await expect
      .poll(async () => ((await t.request('GET', '/v1/dicom/peers')).json.data.items as Array<{ name: string; allow_incoming: boolean }>).find((p) => p.name === 'CT scanner')?.allow_incoming, WAIT)
      .toBe(false);
    await expect.poll(async () => await scanner.getByTestId('peer-incoming').isChecked(), WAIT).toBe(false);

    const rules = page.getByTestId('routing-rules');
    await page.getByTestId('rule-name').fill('CT results to the cloud');
    await page.getByTestId('rule-event').selectOption('analysis.finished');
    await page.getByTestId('rule-modalities').fill('ct');
    await page.getByTestId('rule-peer').selectOption({ label: 'Cloud PACS' });
    await page.getByTestId('add-rule').click();
    const rule = rules.locator('tr', { hasText: 'CT results to the cloud' });
    await rule.waitFor();
    await expect.poll(async () => await rule.textContent(), WAIT).toContain('STOW-RS');
    expect(await rule.textContent()).toContain('CT');

    const analysis = await analyseViaApi(t, phantoms.second.scan_uid);
    expect(analysis.status).toBe('succeeded');
    const jobs = page.getByTestId('send-jobs');
    const row = jobs.locator('tr', { hasText: analysis.id });
    await expect
      .poll(async () => {
        await page.getByTestId('reload-dicom').click();
        return (await row.count()) > 0 ? await row.getByTestId('send-status').textContent() : null;
      }, WAIT)
      .toBe('failed, retrying');
    expect(await row.getByTestId('send-error').textContent()).toMatch(/STOW-RS to Cloud PACS: ECONNREFUSED/);
    expect(await row.getByTestId('send-attempts').textContent()).toBe('1');
    await page.getByTestId('routing-rules').scrollIntoViewIfNeeded();
    await ui.screenshot('dicom-admin-failed');

    const stow = await stowServer(port);
    try {
      await row.getByTestId('retry-send').click();
      await expect
        .poll(async () => {
          await page.getByTestId('reload-dicom').click();
          return await row.getByTestId('send-status').textContent();
        }, WAIT)
        .toBe('sent');
      expect(stow.received).toBe(1);
      expect(await row.getByTestId('send-error').textContent()).toBe('');
      await jobs.scrollIntoViewIfNeeded();
      await ui.screenshot('dicom-admin-sent');
    } finally {
      await new Promise((resolve) => stow.server.close(resolve));
    }
  }, 120_000);
});
