/**
 * The workstation end to end in Debian's Chromium, against the real server serving the built
 * renderer: worklist -> viewer with a finding box (checked in screenshot pixels) -> reject and
 * accept findings (checked through the API) -> draft, finalize, download CSV; admin key
 * rotation shows the old key's expiry; a revoked key lands on the key screen.
 */
import { readFileSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureRendererBuilt, launchBrowser, openUi, UI_DIR, type Ui } from '../helpers/browser.ts';
import { parseCsv } from '../helpers/csv.ts';
import { pixelAt, readPng } from '../helpers/png.ts';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { seedWorkstation, type SeededWorkstation } from '../helpers/workstation-seed.ts';

let t: TestServer;
let browser: Browser;
let seeded: SeededWorkstation;
let radiologistKey: string;

beforeAll(async () => {
  ensureRendererBuilt();
  t = await startTestServer({ uiDir: UI_DIR });
  seeded = await seedWorkstation(t);
  radiologistKey = t.keyFor('radiologist', { scopes: ['write:reports', 'write:scans'] }).key;
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

describe('workstation UI', () => {
  let ui: Ui;

  it('serves the UI with a strict CSP and no key, while the API still needs one', async () => {
    const page = await t.request('GET', '/', { key: null });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(page.headers.get('content-security-policy')).not.toContain('unsafe');
    expect((await t.request('GET', '/v1/scans', { key: null })).status).toBe(401);
    expect((await t.request('GET', '/v1/nothing', { key: null })).json.status).toBe('error');
  });

  it('the worklist shows the scans with their AI summary', async () => {
    ui = await openUi(browser, t.url);
    await ui.signIn(radiologistKey);
    await ui.openWorklist();
    const rows = ui.page.getByTestId('scan-row');
    await expect.poll(() => rows.count()).toBe(seeded.scanCount);
    const row = ui.page.locator(`[data-scan-id="${seeded.target.scanId}"]`);
    await expect.poll(() => row.getByTestId('ai-summary').textContent()).toMatch(/tumor 9\d%/);
    await ui.page.getByTestId('clinical-banner').waitFor();
    await ui.screenshot('worklist');
  });

  it('the viewer draws the finding box where the finding says', async () => {
    await ui.openScan(seeded.target.scanId);
    const canvas = ui.page.getByTestId('viewport-canvas');
    const finding = seeded.target.findings[0]!;
    await ui.page.locator(`[data-finding-id="${finding.id}"]`).click();
    await expect.poll(() => canvas.getAttribute('data-rendered-slice')).toBe(String(finding.sliceIndex));
    const box = (await canvas.boundingBox())!;
    const scale = Number(await canvas.getAttribute('data-scale'));
    const offsetX = Number(await canvas.getAttribute('data-offset-x'));
    const offsetY = Number(await canvas.getAttribute('data-offset-y'));
    const png = readPng(await ui.screenshot('viewer'));
    // The middle of the box's left and bottom edges, in page pixels: the box colour (yellow or,
    // for the selected finding, cyan) must be there, and the image inside must not be.
    const left = box.x + offsetX + finding.location.x * scale;
    const top = box.y + offsetY + finding.location.y * scale;
    const midY = top + (finding.location.height * scale) / 2;
    const bottom = top + finding.location.height * scale;
    const midX = left + (finding.location.width * scale) / 2;
    for (const [x, y] of [[left, midY], [midX, bottom]] as const) {
      const [r, g, b] = pixelAt(png, Math.round(x), Math.round(y));
      const isBoxColour = (r > 200 && g > 170 && b < 90) || (r < 90 && g > 180 && b > 200);
      expect(isBoxColour, `pixel ${r},${g},${b} at ${Math.round(x)},${Math.round(y)}`).toBe(true);
    }
    const inside = pixelAt(png, Math.round(left + 6), Math.round(midY));
    expect(inside[2] > 100 || Math.abs(inside[0] - inside[2]) < 30).toBe(true);
    expect(await ui.page.getByTestId('model-tag').first().textContent()).toContain('v1.0.0');
  });

  it('rejects one finding and accepts another; the API records both', async () => {
    const [first, second] = seeded.target.findings;
    await ui.page.locator(`[data-finding-id="${first!.id}"]`).getByTestId('reject-finding').click();
    await ui.page.locator(`[data-finding-id="${second!.id}"]`).getByTestId('accept-finding').click();
    await expect.poll(() => ui.page.locator(`[data-finding-id="${second!.id}"]`).getAttribute('data-review')).toBe('accepted');
    const result = await t.request('GET', `/v1/scans/${seeded.target.scanId}/results`, { headers: { 'API-Version': '1.1' } });
    const reviews = Object.fromEntries(result.json.data.findings.map((f: any) => [f.id, f.review]));
    expect(reviews[first!.id]).toBe('rejected');
    expect(reviews[second!.id]).toBe('accepted');
    await ui.screenshot('viewer-reviewed');
  });

  it('drafts and finalizes a report, then downloads it as CSV', async () => {
    await ui.openReport(seeded.target.scanId);
    await ui.page.getByTestId('draft-report').click();
    await ui.page.getByTestId('impression').fill('Enhancing lesion, right frontal; see AI finding 1.');
    await ui.page.getByTestId('recommendation').fill('MRI follow-up in 3 months.');
    ui.page.once('dialog', (dialog) => void dialog.accept());
    await ui.page.getByTestId('finalize-report').click();
    await ui.page.getByTestId('report-final').waitFor();
    expect(await ui.page.getByTestId('impression').getAttribute('readonly')).not.toBeNull();
    await ui.screenshot('report');

    const downloadPromise = ui.page.waitForEvent('download');
    await ui.page.getByTestId('download-csv').click();
    const download = await downloadPromise;
    const csv = readFileSync((await download.path())!, 'utf8');
    const [header, row] = parseCsv(csv);
    const record = Object.fromEntries(header!.map((name, i) => [name, row![i]]));
    expect(record['scan_id']).toBe(seeded.target.scanId);
    expect(record['status']).toBe('final');
    expect(record['recommendation']).toBe('MRI follow-up in 3 months.');
  });

  it('admin rotates a key and sees when the old one stops working', async () => {
    const admin = await openUi(browser, t.url);
    await admin.signIn(t.adminKey);
    await admin.openAdmin();
    const victim = t.keyFor('data_engineer', { email: 'rotate-me@hospital.test' });
    await admin.page.getByTestId('reload-keys').click();
    admin.page.once('dialog', (dialog) => void dialog.accept());
    await admin.page.locator(`[data-key-id="${victim.keyId}"]`).getByTestId('rotate-key').click();
    const notice = admin.page.getByTestId('rotated-key');
    await notice.waitFor();
    const keys = await t.request('GET', `/v1/auth/keys?user_id=${victim.userId}`);
    const old = keys.json.data.items.find((k: any) => k.id === victim.keyId);
    expect(old.expires_at).not.toBeNull();
    expect(await notice.getAttribute('data-expires-at')).toBe(old.expires_at);
    expect(await notice.textContent()).toMatch(/stops working/);
    expect(await notice.getByTestId('new-key').textContent()).toMatch(/^mia_/);
    await admin.screenshot('admin-rotated');
    await admin.page.context().close();
  });

  it('a revoked key lands on a clear key screen, not a blank page', async () => {
    const doomed = t.keyFor('radiologist', { email: 'doomed@hospital.test' });
    const victim = await openUi(browser, t.url);
    await victim.signIn(doomed.key);
    await t.request('DELETE', `/v1/auth/keys/${doomed.keyId}`);
    await victim.goTo(`#/scan/${seeded.target.scanId}`);
    const problem = victim.page.getByTestId('key-problem');
    await problem.waitFor();
    expect(await problem.textContent()).toMatch(/not accepted.*Unauthorized.*request [0-9a-f-]{36}/s);
    await victim.screenshot('revoked-key');
    await victim.page.context().close();
  });
});
